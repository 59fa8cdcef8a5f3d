// The Files and Batch APIs' port: what the client listener's /v1/files and
// /v1/batches routes (src/gateway/batches) ask of whoever keeps files and
// runs batches (src/control/batches). The gateway checks the key and reads
// the request; everything stored is behind this interface, so a gateway
// built without it (`llmgw gateway`, a store-less control plane) simply
// does not serve these routes. Answers are OpenAI's objects as JSON; a
// refusal is an LlmgwError (its status and code go to the client).
import type { Readable } from 'node:stream';

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
  createBatch(caller: BatchCaller, body: unknown): Promise<ApiObject>;
  getBatch(caller: BatchCaller, id: string): Promise<ApiObject>;
  listBatches(caller: BatchCaller, q: { after?: string; limit: number }): Promise<ApiObject>;
  cancelBatch(caller: BatchCaller, id: string): Promise<ApiObject>;
}
