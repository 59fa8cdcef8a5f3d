// Command-line flags for llmgw's small subcommands (engine builtin, dev
// make-model): node's strict parseArgs, with the mistakes worded the way the
// rest of llmgw words them: the usage line, and the nearest real flag for a
// mistyped one.
import { readFileSync } from 'node:fs';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { LlmgwError } from '../errors/index.js';
import { nearestName } from '../units/index.js';

export type FlagSpec = NonNullable<ParseArgsConfig['options']>;

/** A usage mistake: what is wrong, then the usage line. */
export function usageError(problem: string, usage: string): LlmgwError {
  return new LlmgwError('LLMGW_CONFIG_INVALID', `${problem}\n${usage}`);
}

/** parseArgs, strict; an unknown flag names the nearest known one. */
export function parseFlags<T extends FlagSpec>(
  argv: readonly string[],
  flags: T,
  usage: string,
  allowPositionals: boolean,
) {
  try {
    return parseArgs({ args: [...argv], options: flags, strict: true, allowPositionals });
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    const unknown = /'(-{1,2}[^']+)'/.exec(message)?.[1];
    const near = unknown ? nearestName(unknown.replace(/^-+/, ''), Object.keys(flags)) : null;
    throw usageError(near ? `${message}; did you mean --${near}?` : message, usage);
  }
}

/** A flag that takes a whole number; undefined when the flag was not given. */
export function wholeNumberFlag(flag: string, text: string | undefined, usage: string): number | undefined {
  if (text === undefined) return undefined;
  if (!/^\d+$/.test(text)) throw usageError(`--${flag} takes a whole number, not "${text}"`, usage);
  return Number(text);
}

/**
 * A secret kept in a file (a token, an engine's key): its first line's
 * text, trimmed; or why there is none, as the end of a sentence that
 * begins with the flag and the path ("cannot be read: ENOENT", "is empty;
 * want it on its first line"). Each caller words the error its own way.
 */
export function readSecretFile(path: string): { text: string } | { problem: string } {
  let text: string;
  try {
    text = readFileSync(path, 'utf8').trim();
  } catch (err) {
    return { problem: `cannot be read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}` };
  }
  return text === '' ? { problem: 'is empty; want it on its first line' } : { text };
}
