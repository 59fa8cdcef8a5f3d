// Where the tests find the real llama.cpp (`llama-server` and its RPC
// server) that `npm run engines:llamacpp` builds from node-llama-cpp's
// bundled source. The build takes minutes, so it lives in a cache outside
// the repository, keyed by the bundle's hash exactly as
// scripts/build-llamacpp.sh keys it; a test never builds it itself. Absent:
// the suite is skipped and says how to build it, except under CI, where a
// skipped suite would pass for the wrong reason and so fails instead.
import { createHash } from 'node:crypto';
import { accessSync, constants, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'vitest';

const BUNDLE = fileURLToPath(new URL('../../node_modules/node-llama-cpp/llama/gitRelease.bundle', import.meta.url));

export interface LlamaCppBinaries {
  /** The directory holding both, for an agent's PATH. */
  readonly dir: string;
  readonly llamaServer: string;
  /** `ggml-rpc-server`, the name this llama.cpp gives its RPC server. */
  readonly rpcServer: string;
}

/** The cache root the build script uses: $LLMGW_ENGINE_CACHE, else $XDG_CACHE_HOME (absent: ~/.cache)/llmgw/engines. */
export function engineCacheRoot(env: NodeJS.ProcessEnv = process.env): string {
  return env.LLMGW_ENGINE_CACHE || join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'llmgw', 'engines');
}

/** Where the build of this checkout's bundle lives (built or not); null when node-llama-cpp's bundle is missing. */
export function llamaCppCacheDir(env: NodeJS.ProcessEnv = process.env): string | null {
  let bundle: Buffer;
  try {
    bundle = readFileSync(BUNDLE);
  } catch {
    return null;
  }
  const hash = createHash('sha256').update(bundle).digest('hex');
  return join(engineCacheRoot(env), `llamacpp-${hash.slice(0, 16)}`);
}

const executable = (path: string): boolean => {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
};

/** The built binaries, or null when `npm run engines:llamacpp` has not been run for this bundle. */
export function llamaCppBinaries(env: NodeJS.ProcessEnv = process.env): LlamaCppBinaries | null {
  const cache = llamaCppCacheDir(env);
  if (cache === null) return null;
  const dir = join(cache, 'bin');
  const found = { dir, llamaServer: join(dir, 'llama-server'), rpcServer: join(dir, 'ggml-rpc-server') };
  return executable(found.llamaServer) && executable(found.rpcServer) ? found : null;
}

/**
 * A describe block that needs the real llama.cpp: given the binaries when
 * they are built; skipped with the command that builds them when not; a
 * failing test under CI, which builds them (.ci/run) and must never skip.
 */
export function describeWithLlamaCpp(name: string, fn: (binaries: LlamaCppBinaries) => void): void {
  const binaries = llamaCppBinaries();
  if (binaries) {
    describe(name, () => fn(binaries));
    return;
  }
  const where = llamaCppCacheDir() ?? '(no node-llama-cpp bundle: run npm ci)';
  if (process.env.CI) {
    describe(name, () => {
      it('has the real llama.cpp to run', () => {
        throw new Error(
          `CI is set but llama.cpp is not built in ${where}: "${name}" needs it (run npm run engines:llamacpp; .ci/run does)`,
        );
      });
    });
    return;
  }
  describe.skip(`${name} (skipped: llama.cpp is not built in ${where}; run npm run engines:llamacpp, about ten minutes once)`, () =>
    fn({ dir: '', llamaServer: '', rpcServer: '' }));
}
