// Which GGUF file llama.cpp and the builtin engine load when the weights are
// a directory (a cache entry keeps its files under files/, an hf:// repo may
// hold one quantisation). Apart from the adapters because it is their only
// read of the disk, and tests of the adapters replace it.
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { LlmgwError } from '../../errors/index.js';

/** Directory levels searched below the weights path: the cache's files/ plus a repository subfolder or two. */
const SEARCH_DEPTH = 3;
/** A split model's parts: llama.cpp is given the first and finds the rest beside it. */
const SPLIT_PART = /^(.*)-(\d{5})-of-(\d{5})\.gguf$/i;

/**
 * The GGUF file to load for `weightsPath`: the path itself when it names a
 * .gguf file, otherwise the single model in the directory below it (for a
 * split model, its first part). Throws LLMGW_ENGINE_START_FAILED naming the
 * candidates when there are none or several, so the operator can point the
 * source at one file.
 */
export function findGgufFile(weightsPath: string): string {
  if (/\.gguf$/i.test(weightsPath)) return weightsPath;
  let isDirectory: boolean;
  try {
    isDirectory = statSync(weightsPath).isDirectory();
  } catch (err) {
    throw new LlmgwError(
      'LLMGW_ENGINE_START_FAILED',
      `the weights at ${weightsPath} cannot be read: ${(err as NodeJS.ErrnoException).code ?? String(err)}`,
      {
        cause: err,
        context: { weightsPath },
      },
    );
  }
  if (!isDirectory) {
    throw new LlmgwError(
      'LLMGW_ENGINE_START_FAILED',
      `the weights at ${weightsPath} are not a .gguf file; llama.cpp and the builtin engine load GGUF only`,
      {
        context: { weightsPath },
      },
    );
  }
  const found: string[] = [];
  const walk = (dir: string, depth: number): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const path = join(dir, entry.name);
      // A multimodal projector (mmproj-*.gguf) sits beside its model but is not one.
      if (entry.isFile() && /\.gguf$/i.test(entry.name) && !/^mmproj/i.test(entry.name)) found.push(path);
      else if (entry.isDirectory() && depth > 0 && !entry.name.startsWith('.')) walk(path, depth - 1);
    }
  };
  walk(weightsPath, SEARCH_DEPTH);
  const models = modelsOf(found);
  if (models.length === 1) return models[0]!;
  if (models.length === 0) {
    throw new LlmgwError(
      'LLMGW_ENGINE_START_FAILED',
      `no .gguf file under ${weightsPath}; llama.cpp and the builtin engine load GGUF only`,
      {
        context: { weightsPath },
      },
    );
  }
  throw new LlmgwError(
    'LLMGW_ENGINE_START_FAILED',
    `${weightsPath} holds ${models.length} GGUF models (${models.join(', ')}); make the model's source name one file`,
    { context: { weightsPath, candidates: models } },
  );
}

/** One path per model: plain files as they are, a split model as its first part. */
function modelsOf(files: readonly string[]): string[] {
  const out: string[] = [];
  for (const file of files) {
    const split = SPLIT_PART.exec(file);
    if (!split) out.push(file);
    else if (Number(split[2]) === 1) out.push(file);
  }
  return out;
}
