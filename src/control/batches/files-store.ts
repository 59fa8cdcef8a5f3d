// The rows of uploaded and produced files (migration 0022_files, in
// store/batches-schema.ts): metadata
// only. A file's bytes live on the control plane's disk (content.ts), never
// in a row, so a 200 MB upload costs the database a few hundred bytes. The
// table, its migration and its repository live together here, as
// store/remote-credentials.ts does; store/schema.ts names the table.
import type { FilesTable } from '../store/batches-schema.js';

export type { FilesTable } from '../store/batches-schema.js';
import type { StoreConnection } from '../store/connection.js';

/** A file's metadata, as the repository returns it. */
export interface FileRecord {
  readonly id: string;
  readonly owner: string;
  readonly purpose: string;
  readonly filename: string;
  readonly bytes: number;
  readonly lines: number;
  readonly createdAtMs: number;
}

export interface FileListQuery {
  readonly purpose?: string;
  /** A file id: only files listed after it (in `order`). */
  readonly after?: string;
  readonly limit: number;
  readonly order: 'asc' | 'desc';
}

function record(r: FilesTable): FileRecord {
  return {
    id: r.id,
    owner: r.owner,
    purpose: r.purpose,
    filename: r.filename,
    bytes: Number(r.bytes),
    lines: Number(r.lines),
    createdAtMs: Number(r.created_at),
  };
}

export function fileRow(f: FileRecord): FilesTable {
  return {
    id: f.id,
    owner: f.owner,
    purpose: f.purpose,
    filename: f.filename,
    bytes: f.bytes,
    lines: f.lines,
    created_at: f.createdAtMs,
  };
}

export class FileRepository {
  constructor(private readonly connection: StoreConnection) {}

  async insert(file: FileRecord): Promise<void> {
    await this.connection.db.insertInto('files').values(fileRow(file)).execute();
  }

  /** The file when `owner` has it; undefined for an unknown id or another owner's (the API answers 404 to both). */
  async get(owner: string, id: string): Promise<FileRecord | undefined> {
    const r = await this.connection.db
      .selectFrom('files')
      .selectAll()
      .where('id', '=', id)
      .where('owner', '=', owner)
      .executeTakeFirst();
    return r && record(r);
  }

  /** `limit` + 1 rows at most, so the caller can tell has_more. */
  async list(owner: string, q: FileListQuery): Promise<FileRecord[]> {
    let query = this.connection.db.selectFrom('files').selectAll().where('owner', '=', owner);
    if (q.purpose) query = query.where('purpose', '=', q.purpose);
    if (q.after) {
      const after = await this.get(owner, q.after);
      if (after) {
        const at = after.createdAtMs;
        query =
          q.order === 'desc'
            ? query.where((eb) =>
                eb.or([eb('created_at', '<', at), eb.and([eb('created_at', '=', at), eb('id', '<', after.id)])]),
              )
            : query.where((eb) =>
                eb.or([eb('created_at', '>', at), eb.and([eb('created_at', '=', at), eb('id', '>', after.id)])]),
              );
      }
    }
    const rows = await query
      .orderBy('created_at', q.order)
      .orderBy('id', q.order)
      .limit(q.limit + 1)
      .execute();
    return rows.map(record);
  }

  /** Which of these ids have a row, whoever owns them. */
  async existing(ids: readonly string[]): Promise<Set<string>> {
    const found = new Set<string>();
    // A few hundred at a time: well under both dialects' parameter limits.
    for (let i = 0; i < ids.length; i += 500) {
      const rows = await this.connection.db
        .selectFrom('files')
        .select('id')
        .where('id', 'in', ids.slice(i, i + 500))
        .execute();
      for (const r of rows) found.add(r.id);
    }
    return found;
  }

  /** True when `owner` had it and its row is now gone. */
  async delete(owner: string, id: string): Promise<boolean> {
    const r = await this.connection.db
      .deleteFrom('files')
      .where('id', '=', id)
      .where('owner', '=', owner)
      .executeTakeFirst();
    return Number(r.numDeletedRows) > 0;
  }
}
