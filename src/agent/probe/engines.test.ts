import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ExecFn, ExecResult } from './exec.js';
import {
  type EngineProbeDeps,
  parseLlamaServerVersion,
  probeEngines,
  rpcServerOnPath,
  scriptPython,
} from './engines.js';

const ok = (stdout: string, stderr = '', exitCode = 0): ExecResult => ({ exitCode, stdout, stderr, timedOut: false });

function machine(
  files: Record<string, string>,
  answer: (file: string, args: readonly string[]) => ExecResult,
): EngineProbeDeps & { runs: string[] } {
  const runs: string[] = [];
  const exec: ExecFn = (file, args) => {
    runs.push(file);
    return Promise.resolve(answer(file, args));
  };
  return {
    runs,
    exec,
    isExecutable: (path) => Promise.resolve(path in files),
    readHead: (path, bytes) =>
      path in files ? Promise.resolve(files[path]!.slice(0, bytes)) : Promise.reject(new Error('ENOENT')),
  };
}

describe('probeEngines', () => {
  it('finds every engine with its version, without running rpc-server or importing vllm', async () => {
    const deps = machine(
      {
        '/opt/venv/bin/vllm': '#!/opt/venv/bin/python3\n# -*- coding: utf-8 -*-\nimport re\n',
        '/opt/venv/bin/python3': '',
        '/usr/local/bin/llama-server': '',
        '/usr/local/bin/rpc-server': '',
        '/usr/bin/python3': '',
      },
      (file, args) => {
        if (file === '/opt/venv/bin/python3') return ok(args[1]!.includes('"vllm"') ? '0.11.2\n' : '0.5.4\n');
        if (file === '/usr/local/bin/llama-server')
          return ok('', 'version: 6123 (9a96389e)\nbuilt with cc (GCC) 13.3.0 for x86_64-linux-gnu\n');
        throw new Error(`unexpected run of ${file}`);
      },
    );
    const engines = await probeEngines('/opt/venv/bin:/usr/local/bin:/usr/bin', 5000, deps);
    expect(engines).toEqual([
      { name: 'vllm', version: '0.11.2', path: '/opt/venv/bin/vllm' },
      { name: 'llamacpp', version: 'b6123 (9a96389e)', path: '/usr/local/bin/llama-server' },
      { name: 'llamacpp-rpc', path: '/usr/local/bin/rpc-server' },
      // sglang has no launcher: the Python that has it is what the adapter runs.
      { name: 'sglang', version: '0.5.4', path: '/opt/venv/bin/python3' },
      { name: 'builtin' },
      { name: 'sim' },
    ]);
    expect(deps.runs, 'rpc-server is never run').not.toContain('/usr/local/bin/rpc-server');
  });

  it('reports only the engines shipped inside llmgw on a bare machine', async () => {
    expect(
      await probeEngines(
        '/usr/bin',
        5000,
        machine({}, () => ok('')),
      ),
    ).toEqual([{ name: 'builtin' }, { name: 'sim' }]);
  });

  it('keeps an engine whose version cannot be read, and leaves sglang out when python3 cannot find it', async () => {
    const deps = machine(
      { '/usr/bin/vllm': '\x7fELF binary', '/usr/bin/llama-server': '', '/usr/bin/python3': '' },
      (file) => {
        if (file === '/usr/bin/llama-server') return { exitCode: null, stdout: '', stderr: '', timedOut: true };
        return ok('', '', 3);
      },
    );
    expect(await probeEngines('/usr/bin', 5000, deps)).toEqual([
      { name: 'vllm', path: '/usr/bin/vllm' },
      { name: 'llamacpp', path: '/usr/bin/llama-server' },
      { name: 'builtin' },
      { name: 'sim' },
    ]);
  });
});

describe('scriptPython', () => {
  it("reads the interpreter from a #! line, through env, and from pip's sh trampoline", () => {
    expect(scriptPython('#!/opt/venv/bin/python3.11\nimport sys\n')).toEqual({ path: '/opt/venv/bin/python3.11' });
    expect(scriptPython('#!/usr/bin/env python3\n')).toEqual({ name: 'python3' });
    expect(scriptPython(`#!/bin/sh\n'''exec' "/very/long/path/venv/bin/python" "$0" "$@"\n' '''\n`)).toEqual({
      path: '/very/long/path/venv/bin/python',
    });
    expect(scriptPython('#!/bin/bash\necho hi\n')).toBeNull();
    expect(scriptPython('\x7fELF')).toBeNull();
  });
});

describe('parseLlamaServerVersion', () => {
  // The real build's output (scripts/build-llamacpp.sh, from node-llama-cpp's bundle), captured.
  const realBuild = readFileSync(new URL('./fixtures/llama-server/own-version-0.4.0-dev.txt', import.meta.url), 'utf8');
  it.each([
    [
      'builds up to late 2025: the build number and commit',
      'version: 4567 (abc1234)\nbuilt with cc (GCC) 13.3.0 for x86_64-linux-gnu\n',
      'b4567 (abc1234)',
    ],
    [
      '0.4 and later: a semantic version, then build and commit',
      'version: 0.4.0-dev (build 1, commit 80fb11a)\n',
      '0.4.0-dev b1 (80fb11a)',
    ],
    ['a release of the semantic form', 'version: 0.5.2 (build 7301, commit 0a1b2c3)\n', '0.5.2 b7301 (0a1b2c3)'],
    ['the real llama-server this suite builds', realBuild, '0.4.0-dev b1 (80fb11a)'],
    ['a build too old to know --version', 'error: unknown argument: --version', undefined],
    ['no output', '', undefined],
  ])('%s', (_case, output, version) => {
    expect(parseLlamaServerVersion(output)).toBe(version);
  });
});

describe('rpc-server under either name', () => {
  it('finds ggml-rpc-server, the name llama.cpp 0.4 gives it, when there is no rpc-server', async () => {
    const deps = machine({ '/opt/llama/bin/llama-server': '', '/opt/llama/bin/ggml-rpc-server': '' }, (file) => {
      if (file === '/opt/llama/bin/llama-server') return ok('', 'version: 0.4.0-dev (build 1, commit 80fb11a)\n');
      throw new Error(`unexpected run of ${file}`);
    });
    const engines = await probeEngines('/opt/llama/bin', 5000, deps);
    expect(
      engines.find((e) => e.name === 'llamacpp-rpc'),
      'the renamed rpc server counts',
    ).toEqual({ name: 'llamacpp-rpc', path: '/opt/llama/bin/ggml-rpc-server' });
    expect(deps.runs, 'and is never run').toEqual(['/opt/llama/bin/llama-server']);
  });

  it('is what the agent launches: the first name on PATH, else the bare rpc-server so the failure names it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-rpc-path-'));
    try {
      expect(rpcServerOnPath(dir), 'nothing on PATH').toBe('rpc-server');
      writeFileSync(join(dir, 'ggml-rpc-server'), '', { mode: 0o755 });
      expect(rpcServerOnPath(`relative:${dir}`)).toBe(join(dir, 'ggml-rpc-server'));
      writeFileSync(join(dir, 'rpc-server'), '', { mode: 0o755 });
      expect(rpcServerOnPath(dir), 'the older name first, as the probe looks').toBe(join(dir, 'rpc-server'));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
