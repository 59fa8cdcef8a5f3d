// The bytes of uploaded files and batch outputs, on the control plane's
// disk under files_dir: one file per id, written under a temporary name and
// renamed into place, so a reader (or a control plane restarted after a
// crash) never sees half a file. Kept out of the database because a batch
// input may be hundreds of megabytes; several control planes on one
// Postgres share the directory (docs/batches.md).
import { createReadStream, type ReadStream } from 'node:fs';
import { mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';

/** Ids are made here (file-<hex>), never taken from a client, but a path is built from them: checked anyway. */
const ID = /^file-[0-9a-f]{32}$/;

export class FileContent {
  constructor(readonly dir: string) {}

  private path(id: string): string {
    if (!ID.test(id)) throw new Error(`not a file id: ${id}`);
    return join(this.dir, id);
  }

  /** A writer for a new file: write its pieces, then commit() (renamed into place) or abort(). */
  async create(id: string): Promise<ContentWriter> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const final = this.path(id);
    const temp = join(this.dir, `.${id}.${randomBytes(4).toString('hex')}.tmp`);
    const handle = await open(temp, 'wx', 0o600);
    let bytes = 0;
    return {
      async write(piece: string | Buffer) {
        const b = typeof piece === 'string' ? Buffer.from(piece, 'utf8') : piece;
        bytes += b.length;
        await handle.write(b);
      },
      get bytes() {
        return bytes;
      },
      async commit() {
        await handle.sync();
        await handle.close();
        await rename(temp, final);
      },
      async abort() {
        await handle.close().catch(() => {});
        await rm(temp, { force: true });
      },
    };
  }

  async put(id: string, bytes: Buffer): Promise<void> {
    const w = await this.create(id);
    try {
      await w.write(bytes);
      await w.commit();
    } catch (err) {
      await w.abort();
      throw err;
    }
  }

  read(id: string): Promise<Buffer> {
    return readFile(this.path(id));
  }

  stream(id: string): ReadStream {
    return createReadStream(this.path(id));
  }

  async remove(id: string): Promise<void> {
    await rm(this.path(id), { force: true });
  }
}

export interface ContentWriter {
  write(piece: string | Buffer): Promise<void>;
  readonly bytes: number;
  commit(): Promise<void>;
  abort(): Promise<void>;
}
