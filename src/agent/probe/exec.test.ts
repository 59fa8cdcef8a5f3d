import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { execProcess, findOnPath, isExecutableFile, isNotFound } from './exec.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'llmgw-exec-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function script(name: string, body: string): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, `#!/bin/sh\n${body}\n`);
  await chmod(path, 0o755);
  return path;
}

describe('execProcess', () => {
  it('resolves with the output and exit code of a failing program instead of rejecting', async () => {
    const path = await script('fails', 'echo out; echo err >&2; exit 6');
    expect(await execProcess(path, [], { timeoutMs: 10_000 })).toEqual({
      exitCode: 6,
      stdout: 'out\n',
      stderr: 'err\n',
      timedOut: false,
    });
  });

  it('rejects with ENOENT when the program does not exist', async () => {
    const err = await execProcess(join(dir, 'missing'), [], { timeoutMs: 10_000 }).catch((e: unknown) => e);
    expect(isNotFound(err), String(err)).toBe(true);
  });

  it('kills a program that runs past its timeout and says so', async () => {
    // exec replaces the shell, so the kill reaches the sleeping process itself and no child outlives the test.
    const path = await script('hangs', 'exec sleep 30');
    const result = await execProcess(path, [], { timeoutMs: 300 });
    expect(result).toMatchObject({ exitCode: null, timedOut: true });
  });
});

describe('findOnPath', () => {
  it('finds the first executable file on the PATH and skips empty and relative entries', async () => {
    await script('tool', 'true');
    await writeFile(join(dir, 'not-executable'), 'x');
    expect(await findOnPath('tool', `:relative:/nonexistent:${dir}`, isExecutableFile)).toBe(join(dir, 'tool'));
    expect(await findOnPath('not-executable', dir, isExecutableFile)).toBeNull();
    expect(await findOnPath('tool', '', isExecutableFile)).toBeNull();
  });
});
