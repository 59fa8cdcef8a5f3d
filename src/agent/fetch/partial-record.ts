// What a partial download must remember to be resumed by a later agent
// process: which source and commit it holds, and per file the size and
// validator the server gave and, once verified, its hash. Without it a
// restarted agent could append the rest of a newer file to the start of an
// older one. Kept in `state.json` inside the partial directory, written by
// replacing the file whole so a crash leaves the old or the new record.
import { readFile, rename, unlink, writeFile } from 'node:fs/promises';
import { posix } from 'node:path';
import { z } from 'zod';

const STATE_FILE = 'state.json';

const FileStateSchema = z.object({
  /** Absent: not known yet (a URL whose server has not answered). */
  total_bytes: z.number().int().nonnegative().optional(),
  /** Strong ETag or Last-Modified of the response the bytes came from; absent: the server gave none. */
  validator: z.string().optional(),
  /** Set once the file is complete and verified; absent: still to fetch or finish. */
  sha256: z.string().optional(),
});
export type FileState = z.infer<typeof FileStateSchema>;

const PartialStateSchema = z.object({
  version: z.literal(1),
  canonical_source: z.string(),
  /** hf: the commit being fetched; absent for URLs. */
  commit: z.string().optional(),
  files: z.record(z.string(), FileStateSchema),
});
type PartialState = z.infer<typeof PartialStateSchema>;

export class PartialRecord {
  readonly #path: string;
  readonly #state: PartialState;
  /** Writes run one after another; files finishing together must not lose each other's updates. */
  #writing: Promise<void> = Promise.resolve();

  private constructor(path: string, state: PartialState) {
    this.#path = path;
    this.#state = state;
  }

  /**
   * The record of the partial in `dir` if it holds `canonicalSource` (at
   * `commit`, for hf); null when there is a record for something else or an
   * unreadable one, so the caller throws the partial away. A directory with
   * no record at all is new (or predates any byte) and starts fresh.
   */
  static async open(dir: string, canonicalSource: string, commit: string | undefined): Promise<PartialRecord | null> {
    const path = posix.join(dir, STATE_FILE);
    let text: string | null = null;
    try {
      text = await readFile(path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    if (text === null) {
      const record = new PartialRecord(path, {
        version: 1,
        canonical_source: canonicalSource,
        ...(commit ? { commit } : {}),
        files: {},
      });
      await record.#write();
      return record;
    }
    let json: unknown = null;
    try {
      json = JSON.parse(text);
    } catch {
      return null;
    }
    const parsed = PartialStateSchema.safeParse(json);
    if (!parsed.success || parsed.data.canonical_source !== canonicalSource || parsed.data.commit !== commit)
      return null;
    return new PartialRecord(path, parsed.data);
  }

  file(path: string): FileState {
    return this.#state.files[path] ?? {};
  }

  update(path: string, patch: FileState): Promise<void> {
    this.#state.files[path] = { ...this.file(path), ...patch };
    return this.#write();
  }

  /** Called just before the partial becomes an entry: the record has no place in a finished one. */
  async remove(): Promise<void> {
    await this.#writing;
    await unlink(this.#path).catch(() => undefined);
  }

  #write(): Promise<void> {
    const text = `${JSON.stringify(this.#state)}\n`;
    const next = this.#writing.then(async () => {
      await writeFile(`${this.#path}.tmp`, text);
      await rename(`${this.#path}.tmp`, this.#path);
    });
    this.#writing = next.catch(() => undefined);
    return next;
  }
}
