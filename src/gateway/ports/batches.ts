// The Files and Batch APIs' port: what the client listener's /v1/files and
// /v1/batches routes (src/gateway/batches) ask of whoever keeps files and
// runs batches (src/control/batches). The gateway checks the key and reads
// the request; everything stored is behind this interface, so a gateway
// built without it (`llmgw gateway`, a store-less control plane) simply
// does not serve these routes. Answers are OpenAI's objects as JSON; a
// refusal is an LlmgwError (its status and code go to the client).
import type { Readable } from 'node:stream';
import { z } from 'zod';

/** The endpoints a batch may run, as OpenAI names them in a batch's `endpoint` and each input line's `url`. */
export const BATCH_ENDPOINTS = ['/v1/chat/completions', '/v1/embeddings', '/v1/responses'] as const;
export type BatchEndpoint = (typeof BATCH_ENDPOINTS)[number];

/** The most metadata a batch keeps, as OpenAI allows: 16 strings of at most 512 characters. */
const METADATA_KEYS = 16;
const METADATA_VALUE_CHARS = 512;

/**
 * POST /v1/batches's body, declared on the route: what a batch is made of.
 * Fields OpenAI has and llmgw does not use are dropped, not refused, so a
 * newer client still works. The completion window is checked by whoever
 * runs batches, against its own shortest window.
 */
export const CreateBatchBodySchema = z.object(
  {
    input_file_id: z.string().min(1, 'name an uploaded file (its id, file-…)'),
    endpoint: z.enum(BATCH_ENDPOINTS, { error: `want one of ${BATCH_ENDPOINTS.join(', ')}` }),
    completion_window: z.string(),
    metadata: z
      .record(z.string(), z.string().max(METADATA_VALUE_CHARS))
      .refine((m) => Object.keys(m).length <= METADATA_KEYS, `at most ${METADATA_KEYS} keys`)
      .nullish(),
  },
  { error: 'send a JSON object: {"input_file_id", "endpoint", "completion_window"}' },
);
export type CreateBatchBody = z.output<typeof CreateBatchBodySchema>;

/** Who is asking: the key the gateway resolved (null when the listener asks no key). */
export interface BatchCaller {
  readonly keyId: string;
  /** The key's team: files and batches belong to it. Absent = a key store without teams (the key owns them). */
  readonly team?: string;
}

export type ApiObject = Record<string, unknown>;

export interface FilesAndBatches {
  /** The largest file an upload may carry, bytes (files_max_size): the route's body limit is set from it. */
  readonly fileMaxBytes: number;
  uploadFile(caller: BatchCaller, file: { filename: string; purpose: string; bytes: Buffer }): Promise<ApiObject>;
  listFiles(
    caller: BatchCaller,
    q: { purpose?: string; after?: string; limit: number; order: 'asc' | 'desc' },
  ): Promise<ApiObject>;
  getFile(caller: BatchCaller, id: string): Promise<ApiObject>;
  /** The file's bytes, as a stream. */
  fileContent(caller: BatchCaller, id: string): Promise<Readable>;
  deleteFile(caller: BatchCaller, id: string): Promise<ApiObject>;
  createBatch(caller: BatchCaller, body: CreateBatchBody): Promise<ApiObject>;
  getBatch(caller: BatchCaller, id: string): Promise<ApiObject>;
  listBatches(caller: BatchCaller, q: { after?: string; limit: number }): Promise<ApiObject>;
  cancelBatch(caller: BatchCaller, id: string): Promise<ApiObject>;
}
