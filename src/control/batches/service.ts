// The Files and Batch APIs behind the client listener's routes: the
// FilesAndBatches port, over the store's rows (files-store.ts,
// batch-store.ts) and the files' bytes on disk (content.ts). Files and
// batches belong to the caller's team (or its key, without teams); another
// owner's are answered as unknown. Running is the runner's (runner.ts):
// this only records what a client asks and tells the runner.
import { randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import { LlmgwError } from '../../errors/index.js';
import type { ApiObject, BatchCaller, CreateBatchBody, FilesAndBatches } from '../../gateway/index.js';
import { parseDurationMs } from '../../units/index.js';
import type { BatchSettings } from '../config/batches.js';
import {
  CANCELLABLE_STATUSES,
  isActive,
  NEW_BATCH_ROW,
  type BatchRepository,
  type BatchRow,
  type NewLine,
} from './batch-store.js';
import type { FileContent } from './content.js';
import type { FileRecord, FileRepository } from './files-store.js';
import { parseBatchInput } from './input.js';

/** `file-` or `batch_` and 32 hex digits: 128 random bits. */
export function newId(prefix: 'file-' | 'batch_' | 'batch_req_'): string {
  return `${prefix}${randomBytes(16).toString('hex')}`;
}

/** Whose a caller's files and batches are: its team's, else its key's; `anonymous` when no key is asked. */
export function ownerOf(caller: BatchCaller): string {
  if (caller.team !== undefined) return `team:${caller.team}`;
  return caller.keyId === 'anonymous' ? 'anonymous' : `key:${caller.keyId}`;
}

const seconds = (ms: number | null) => (ms === null ? null : Math.floor(ms / 1000));

export function fileObject(f: FileRecord): ApiObject {
  return {
    id: f.id,
    object: 'file',
    bytes: f.bytes,
    created_at: seconds(f.createdAtMs),
    filename: f.filename,
    purpose: f.purpose,
    status: 'processed',
  };
}

export function batchObject(b: BatchRow, counts: { total: number; completed: number; failed: number }): ApiObject {
  return {
    id: b.id,
    object: 'batch',
    endpoint: b.endpoint,
    errors: b.errors === null ? null : { object: 'list', data: JSON.parse(b.errors) as unknown },
    input_file_id: b.input_file_id,
    completion_window: b.completion_window,
    status: b.status,
    output_file_id: b.output_file_id,
    error_file_id: b.error_file_id,
    created_at: seconds(b.created_at),
    in_progress_at: seconds(b.in_progress_at),
    expires_at: seconds(b.expires_at),
    finalizing_at: seconds(b.finalizing_at),
    completed_at: seconds(b.completed_at),
    failed_at: seconds(b.failed_at),
    expired_at: seconds(b.expired_at),
    cancelling_at: seconds(b.cancelling_at),
    cancelled_at: seconds(b.cancelled_at),
    request_counts: { total: counts.total, completed: counts.completed, failed: counts.failed },
    metadata: b.metadata === null ? null : (JSON.parse(b.metadata) as unknown),
  };
}

function badParam(param: string, message: string): LlmgwError {
  return new LlmgwError('LLMGW_BAD_REQUEST', message, { status: 400, context: { param } });
}

const fileNotFound = (id: string) =>
  new LlmgwError('LLMGW_FILE_NOT_FOUND', `no file ${id.slice(0, 80)} here (files belong to the key's team)`, {
    status: 404,
  });
const batchNotFound = (id: string) =>
  new LlmgwError('LLMGW_BATCH_NOT_FOUND', `no batch ${id.slice(0, 80)} here (batches belong to the key's team)`, {
    status: 404,
  });

/** The completion window in ms, if it is one this listener accepts: OpenAI's 24h, or down to batch_min_completion_window. */
export function completionWindowMs(window: unknown, minMs: number): number {
  const ms = typeof window === 'string' && /^\d+[smh]$/.test(window) ? parseDurationMs(window) : null;
  if (typeof ms !== 'number' || ms < minMs || ms > 86_400_000)
    throw badParam(
      'completion_window',
      minMs >= 86_400_000
        ? 'completion_window must be "24h"'
        : `completion_window must be a duration from ${minMs / 1000}s to 24h, like "24h"`,
    );
  return ms;
}

export interface BatchServiceDeps {
  readonly files: FileRepository;
  readonly batches: BatchRepository;
  readonly content: FileContent;
  readonly settings: BatchSettings;
  readonly now: () => number;
  /** Told when a batch is made or cancelled: the runner looks at once rather than at its next tick. */
  readonly notify: () => void;
  /**
   * The catalog, to store each line under the model's own name rather than an
   * alias: the pace, the runner's in-flight count and the scaler's demand are
   * all kept per model name. Absent, or a name it does not know: kept as given
   * (such a line is answered 404 when it runs, as the request would be).
   */
  readonly catalog?: { resolve(nameOrAlias: string): { readonly name: string } | undefined };
}

export class BatchService implements FilesAndBatches {
  readonly fileMaxBytes: number;

  constructor(private readonly deps: BatchServiceDeps) {
    this.fileMaxBytes = deps.settings.fileMaxBytes;
  }

  async uploadFile(
    caller: BatchCaller,
    file: { filename: string; purpose: string; bytes: Buffer },
  ): Promise<ApiObject> {
    const { settings } = this.deps;
    if (file.bytes.length > settings.fileMaxBytes)
      throw new LlmgwError(
        'LLMGW_BODY_TOO_LARGE',
        `the file is ${file.bytes.length} bytes, over files_max_size (${settings.fileMaxBytes}); split it`,
        { status: 413 },
      );
    const input = parseBatchInput(file.bytes, settings.maxLines);
    const record: FileRecord = {
      id: newId('file-'),
      owner: ownerOf(caller),
      purpose: file.purpose,
      filename: file.filename.slice(0, 255) || 'input.jsonl',
      bytes: file.bytes.length,
      lines: input.lines.length,
      createdAtMs: this.deps.now(),
    };
    // Bytes first: a row never names a file that is not on disk.
    await this.deps.content.put(record.id, file.bytes);
    await this.deps.files.insert(record);
    return fileObject(record);
  }

  async listFiles(
    caller: BatchCaller,
    q: { purpose?: string; after?: string; limit: number; order: 'asc' | 'desc' },
  ): Promise<ApiObject> {
    const rows = await this.deps.files.list(ownerOf(caller), q);
    const data = rows.slice(0, q.limit).map(fileObject);
    return page(data, rows.length > q.limit);
  }

  async getFile(caller: BatchCaller, id: string): Promise<ApiObject> {
    return fileObject(await this.file(caller, id));
  }

  async fileContent(caller: BatchCaller, id: string): Promise<Readable> {
    await this.file(caller, id);
    return this.deps.content.stream(id);
  }

  async deleteFile(caller: BatchCaller, id: string): Promise<ApiObject> {
    // The runner reads a batch's input until the batch ends: deleted sooner, its lines could never run.
    if ((await this.deps.files.get(ownerOf(caller), id)) && (await this.deps.batches.inputInUse(id)))
      throw new LlmgwError(
        'LLMGW_CONFLICT',
        `file ${id} is the input of a batch still running; cancel it or wait for it to end`,
        {
          status: 409,
        },
      );
    if (!(await this.deps.files.delete(ownerOf(caller), id))) throw fileNotFound(id);
    await this.deps.content.remove(id);
    return { id, object: 'file', deleted: true };
  }

  /** `b` has its shape checked by the route (CreateBatchBodySchema); the window and the file are checked here. */
  async createBatch(caller: BatchCaller, b: CreateBatchBody): Promise<ApiObject> {
    const windowMs = completionWindowMs(b.completion_window, this.deps.settings.minWindowMs);
    const metadata = b.metadata ?? null;
    const file = await this.file(caller, b.input_file_id);
    if (file.purpose !== 'batch')
      throw badParam('input_file_id', `file ${file.id} is not a batch input (purpose batch)`);
    const input = parseBatchInput(await this.deps.content.read(file.id), this.deps.settings.maxLines, b.endpoint);
    const now = this.deps.now();
    const row: BatchRow = {
      ...NEW_BATCH_ROW,
      id: newId('batch_'),
      owner: ownerOf(caller),
      key_id: caller.keyId,
      input_file_id: file.id,
      endpoint: b.endpoint,
      completion_window: b.completion_window,
      metadata: metadata === null ? null : JSON.stringify(metadata),
      status: 'validating',
      created_at: now,
      expires_at: now + windowMs,
      total: input.lines.length,
    };
    await this.deps.batches.create(row, this.canonical(input.lines));
    this.deps.notify();
    return batchObject(row, { total: row.total, completed: 0, failed: 0 });
  }

  async getBatch(caller: BatchCaller, id: string): Promise<ApiObject> {
    const row = await this.deps.batches.get(id, ownerOf(caller));
    if (!row) throw batchNotFound(id);
    return this.withCounts(row);
  }

  async listBatches(caller: BatchCaller, q: { after?: string; limit: number }): Promise<ApiObject> {
    const rows = await this.deps.batches.list(ownerOf(caller), q.limit, q.after);
    const data = await Promise.all(rows.slice(0, q.limit).map((r) => this.withCounts(r)));
    return page(data, rows.length > q.limit);
  }

  async cancelBatch(caller: BatchCaller, id: string): Promise<ApiObject> {
    const owner = ownerOf(caller);
    const row = await this.deps.batches.get(id, owner);
    if (!row) throw batchNotFound(id);
    if (!(await this.deps.batches.move(id, CANCELLABLE_STATUSES, 'cancelling', this.deps.now()))) {
      const now = await this.deps.batches.get(id, owner);
      if (now && (now.status === 'cancelling' || now.status === 'cancelled')) return this.withCounts(now);
      throw new LlmgwError('LLMGW_BATCH_NOT_CANCELLABLE', `batch ${id} has ended (${now?.status}): nothing to cancel`, {
        status: 409,
      });
    }
    this.deps.notify();
    return this.withCounts((await this.deps.batches.get(id, owner))!);
  }

  /** The lines with each model named as the catalog names it (an alias counted under its model). */
  private canonical(lines: readonly NewLine[]): NewLine[] {
    const catalog = this.deps.catalog;
    if (!catalog) return [...lines];
    const names = new Map<string, string>();
    return lines.map((l) => {
      let name = names.get(l.model);
      if (name === undefined) names.set(l.model, (name = catalog.resolve(l.model)?.name ?? l.model));
      return name === l.model ? l : { ...l, model: name };
    });
  }

  private async file(caller: BatchCaller, id: string): Promise<FileRecord> {
    const f = await this.deps.files.get(ownerOf(caller), id);
    if (!f) throw fileNotFound(id);
    return f;
  }

  /** Its counts: from its lines while it runs, from its row once it ended (its lines' rows are gone then). */
  private async withCounts(row: BatchRow): Promise<ApiObject> {
    const ended = !isActive(row.status);
    const counts = ended
      ? { total: row.total, completed: row.completed, failed: row.failed }
      : await this.deps.batches.counts(row.id, this.deps.now());
    return batchObject(row, { total: row.total, completed: counts.completed, failed: counts.failed });
  }
}

function page(data: ApiObject[], hasMore: boolean): ApiObject {
  return {
    object: 'list',
    data,
    first_id: (data[0]?.id as string | undefined) ?? null,
    last_id: (data.at(-1)?.id as string | undefined) ?? null,
    has_more: hasMore,
  };
}
