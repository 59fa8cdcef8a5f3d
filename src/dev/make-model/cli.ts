// `llmgw dev make-model OUT.gguf [--seed N]`: the tiny model from the command
// line, for trying the builtin engine or a catalog entry by hand. Shape flags
// exist for benchmarks that want a model big enough to time.
import { isLlmgwError } from '../../errors/index.js';
import { formatBytes } from '../../units/index.js';
import { parseFlags, usageError as flagUsageError, wholeNumberFlag } from '../../validation/flags.js';
import { makeTinyModel, type MakeTinyModelOptions } from './make-tiny-model.js';
import { stat } from 'node:fs/promises';

const USAGE =
  'usage: llmgw dev make-model OUT.gguf [--seed N] [--embedding-length N] [--blocks N] [--heads N] [--ff-length N] [--context-length N]';

const FLAGS = {
  seed: { type: 'string' },
  'embedding-length': { type: 'string' },
  blocks: { type: 'string' },
  heads: { type: 'string' },
  'ff-length': { type: 'string' },
  'context-length': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

const usageError = (problem: string) => flagUsageError(problem, USAGE);
const wholeNumber = (flag: string, text: string | undefined) => wholeNumberFlag(flag, text, USAGE);

function parse(argv: readonly string[]): { outPath: string; options: MakeTinyModelOptions } | 'help' {
  const { values, positionals } = parseFlags(argv, FLAGS, USAGE, true);
  if (values.help) return 'help';
  if (positionals.length !== 1) throw usageError('name one output file, e.g. tiny.gguf');
  const options: MakeTinyModelOptions = {};
  const numbers: [keyof MakeTinyModelOptions, string][] = [
    ['seed', 'seed'],
    ['embeddingLength', 'embedding-length'],
    ['blockCount', 'blocks'],
    ['headCount', 'heads'],
    ['feedForwardLength', 'ff-length'],
    ['contextLength', 'context-length'],
  ];
  for (const [key, flag] of numbers) {
    const value = wholeNumber(flag, values[flag as keyof typeof values] as string | undefined);
    if (value !== undefined) Object.assign(options, { [key]: value });
  }
  return { outPath: positionals[0]!, options };
}

/**
 * Writes the model and resolves with the exit code (also set on
 * process.exitCode): 0 written, 1 failed, 2 usage mistake.
 */
export async function runMakeModelCli(
  argv: readonly string[],
  io: { out?: (line: string) => void; err?: (line: string) => void } = {},
): Promise<number> {
  const out = io.out ?? ((line: string) => void process.stdout.write(`${line}\n`));
  const err = io.err ?? ((line: string) => void process.stderr.write(`${line}\n`));
  let code: number;
  try {
    const parsed = parse(argv);
    if (parsed === 'help') {
      out(USAGE);
      code = 0;
    } else {
      const info = await makeTinyModel(parsed.outPath, parsed.options);
      const { size } = await stat(info.path);
      out(
        `wrote ${info.path} (${formatBytes(size)}, seed ${info.options.seed}, ${info.options.blockCount} blocks of width ${info.options.embeddingLength})`,
      );
      code = 0;
    }
  } catch (error) {
    const known = isLlmgwError(error) ? error : undefined;
    err(`llmgw dev make-model: ${known ? known.message : error instanceof Error ? error.message : String(error)}`);
    code = known?.code === 'LLMGW_CONFIG_INVALID' ? 2 : 1;
  }
  process.exitCode = code;
  return code;
}
