// One log file per shard: the engine's stdout and stderr go straight into it
// (an open file, not a pipe through the agent, so the engine keeps logging
// after the agent exits), with a line from the supervisor at each start and
// stop. Rotated by size with copy-and-truncate, the only rotation an engine
// that holds the file open in append mode follows: `<shard>.log` is copied to
// `<shard>.log.1` (older copies shift up, the oldest is dropped) and then cut
// to zero; the engine's next write lands at the new start. Lines written
// between the copy and the cut are lost, and a file can pass its cap by what
// the engine writes between two checks; both are the usual price of
// copytruncate, and cheaper than losing an engine's output when the agent
// restarts.
import { appendFileSync, closeSync, existsSync, fstatSync, openSync, readSync } from 'node:fs';
import { copyFile, rename, stat, truncate, unlink } from 'node:fs/promises';

/** Lines the supervisor writes into the engine's log start with this, so they can be told from the engine's. */
export const SUPERVISOR_LINE_PREFIX = '[llmgw] ';
const START_LINE = `${SUPERVISOR_LINE_PREFIX}starting `;
/** A tail reads at most this much of a file, so a log of one endless line cannot exhaust memory. */
const TAIL_READ_LIMIT_BYTES = 4 * 1024 * 1024;

export interface ShardLogLimits {
  /** A file above this many bytes is rotated at the next check. */
  readonly maxBytes: number;
  /** Files kept, the live one included: 2 = `<shard>.log` and `<shard>.log.1`. 1 = the live file only (cut, not copied). */
  readonly filesKept: number;
}

export class ShardLog {
  constructor(
    readonly path: string,
    readonly limits: ShardLogLimits,
  ) {}

  /** A descriptor for the engine's stdout and stderr, opened for appending; the caller closes its copy after the spawn. */
  openForEngine(): number {
    return openSync(this.path, 'a', 0o640);
  }

  /** A line of the supervisor's own ("starting pid …", "stopping: …"). */
  note(text: string): void {
    appendFileSync(this.path, `${SUPERVISOR_LINE_PREFIX}${text}\n`, { mode: 0o640 });
  }

  /** Marks the start of a run; lastRunLines() reads from the latest such line on. */
  noteStart(text: string): void {
    this.note(`starting ${text}`);
  }

  /** Rotates when the live file is over its cap. Resolves true when it did. */
  async rotateIfNeeded(): Promise<boolean> {
    let size: number;
    try {
      size = (await stat(this.path)).size;
    } catch {
      return false;
    }
    if (size <= this.limits.maxBytes) return false;
    const rotated = (n: number) => `${this.path}.${n}`;
    if (this.limits.filesKept > 1) {
      await unlink(rotated(this.limits.filesKept - 1)).catch(() => undefined);
      for (let n = this.limits.filesKept - 2; n >= 1; n--)
        await rename(rotated(n), rotated(n + 1)).catch(() => undefined);
      await copyFile(this.path, rotated(1));
    }
    await truncate(this.path, 0);
    return true;
  }

  /** The last `count` lines, reaching into rotated files when the live one holds fewer. */
  tail(count: number): string[] {
    const out: string[] = [];
    for (let n = 0; n < this.limits.filesKept && out.length < count; n++) {
      const file = n === 0 ? this.path : `${this.path}.${n}`;
      if (!existsSync(file)) break;
      out.unshift(...lastLines(file, count - out.length));
    }
    return out;
  }

  /** The engine's own last `count` lines of its latest run: nothing from before the latest start, none of the supervisor's lines. */
  lastRunLines(count: number): string[] {
    // Supervisor lines are few; read a margin so they do not crowd the engine's out.
    const lines = this.tail(count + 20);
    let from = 0;
    for (let i = lines.length - 1; i >= 0; i--) {
      if (lines[i]!.startsWith(START_LINE)) {
        from = i + 1;
        break;
      }
    }
    return lines
      .slice(from)
      .filter((line) => !line.startsWith(SUPERVISOR_LINE_PREFIX) && line.trim() !== '')
      .slice(-count);
  }
}

/** The last `count` lines of `file`, read backwards in chunks. */
export function lastLines(file: string, count: number): string[] {
  if (count <= 0) return [];
  const fd = openSync(file, 'r');
  try {
    const size = fstatSync(fd).size;
    const chunks: Buffer[] = [];
    let position = size;
    let newlines = 0;
    let readBytes = 0;
    // One newline more than lines wanted, so the first line kept is whole.
    while (position > 0 && newlines <= count && readBytes < TAIL_READ_LIMIT_BYTES) {
      const length = Math.min(64 * 1024, position);
      position -= length;
      const chunk = Buffer.alloc(length);
      readSync(fd, chunk, 0, length, position);
      chunks.unshift(chunk);
      readBytes += length;
      for (const byte of chunk) if (byte === 0x0a) newlines++;
    }
    const lines = Buffer.concat(chunks).toString('utf8').split('\n');
    if (lines.at(-1) === '') lines.pop();
    if (position > 0) lines.shift();
    return lines.slice(-count);
  } finally {
    closeSync(fd);
  }
}

/**
 * `line` with every occurrence of `secret` replaced. Engines echo their own
 * arguments (vLLM's "non-default args", SGLang's ServerArgs), --api-key
 * included, so log lines quoted in an error or served to `ctl logs` pass
 * through this. Absent or empty secret: the line as it is.
 */
export function redactSecret(line: string, secret: string | undefined): string {
  return secret ? line.replaceAll(secret, '<redacted>') : line;
}

/**
 * Flags whose next argument is always a secret, whatever it looks like. The
 * value after another flag that names a key, token or secret is taken for a
 * secret only when it does not look like a flag, because such a flag may take
 * no value (`--skip-tokenizer-init --port 8000`); the engines' --api-key always
 * takes one, and a value that starts with `-` is a value there.
 */
const SECRET_VALUE_FLAGS: ReadonlySet<string> = new Set(['--api-key', '--hf-token', '--join-token', '--admin-token']);

/** argv for a log line: the value after a flag that names a key, token, secret or password is replaced. */
export function redactArgv(argv: readonly string[]): string[] {
  const secret = /key|token|secret|password|credential/i;
  return argv.map((arg, i) => {
    const eq = arg.indexOf('=');
    if (arg.startsWith('-') && eq !== -1 && secret.test(arg.slice(0, eq))) return `${arg.slice(0, eq)}=<redacted>`;
    const previous = argv[i - 1];
    if (previous === undefined || !previous.startsWith('-') || previous.includes('=')) return arg;
    if (SECRET_VALUE_FLAGS.has(previous)) return '<redacted>';
    return secret.test(previous) && !arg.startsWith('-') ? '<redacted>' : arg;
  });
}
