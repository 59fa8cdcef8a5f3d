// Golden command lines for every adapter, one node and several: the argv and
// environment are written out in full, so a changed flag shows up here as a
// diff a reviewer can check against ENGINES.md rather than as an engine that
// refuses to start on a GPU machine.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LlmgwError } from '../../errors/index.js';
import { adapterFor, type EngineName, type ShardLaunch } from './index.js';
import { ENGINE_NAMES, type EngineAdapterOptions } from './shard-launch.js';
import { findGgufFile } from './gguf-file.js';

const NODE = '/usr/bin/node';
const BIN = '/opt/llmgw/bin/llmgw.js';
const SECRETS = '/var/lib/llmgw/agent/engine-secrets';
const options: EngineAdapterOptions = {
  llmgwBin: BIN,
  nodePath: NODE,
  secretsDir: SECRETS,
  resolveGguf: (path) => (path.endsWith('.gguf') ? path : `${path}/model-Q4_K_M.gguf`),
};

function launch(
  engine: string,
  overrides: Partial<ShardLaunch> = {},
  profile: Partial<ShardLaunch['profile']> = {},
): ShardLaunch {
  return {
    replicaId: 'rep-1',
    shardId: 'rep-1-s0',
    model: { name: 'llama-3-8b', aliases: ['llama3', 'chat'] },
    profile: { name: 'main', engine, gpus: 2, shards: 1, args: [], env: {}, ...profile },
    weightsPath: '/var/lib/llmgw/cache/ab12/files',
    gpuIndices: [2, 3],
    host: '0.0.0.0',
    port: 20001,
    rank: 0,
    peers: [],
    ...overrides,
  };
}

/** Three nodes on a fabric 10.1.0.0/24; rank 0 is the head. */
const PEERS = [
  { rank: 0, address: '10.1.0.10', port: 29600 },
  { rank: 1, address: '10.1.0.11', port: 50060 },
  { rank: 2, address: '10.1.0.12' },
];

function multi(engine: string, rank: number, profile: Partial<ShardLaunch['profile']> = {}): ShardLaunch {
  return launch(engine, { rank, peers: PEERS, shardId: `rep-1-s${rank}` }, { shards: 3, ...profile });
}

function plan(l: ShardLaunch) {
  return adapterFor(l.profile.engine, options).plan(l);
}

describe('vllm', () => {
  it('serves one node with tensor parallel over its GPUs, names and aliases, profile args last and profile env over ours', () => {
    const p = plan(
      launch(
        'vllm',
        {},
        { args: ['--max-model-len', '32k'], env: { VLLM_LOGGING_LEVEL: 'DEBUG', CUDA_VISIBLE_DEVICES: '2,3' } },
      ),
    );
    expect(p.argv).toEqual([
      'vllm',
      'serve',
      '/var/lib/llmgw/cache/ab12/files',
      '--served-model-name',
      'llama-3-8b',
      'llama3',
      'chat',
      '--host',
      '0.0.0.0',
      '--port',
      '20001',
      '--tensor-parallel-size',
      '2',
      '--max-model-len',
      '32k',
    ]);
    expect(p.env).toEqual({ CUDA_VISIBLE_DEVICES: '2,3', VLLM_LOGGING_LEVEL: 'DEBUG' });
    expect(p.readiness, 'a wildcard bind is probed on loopback').toEqual({
      kind: 'http',
      host: '127.0.0.1',
      port: 20001,
      path: '/health',
    });
    expect(p.servesApi).toBe(true);
  });

  it('runs rank 0 of several nodes with the mp backend and the API, meeting at its own fabric address', () => {
    const p = plan(multi('vllm', 0));
    expect(p.argv).toEqual([
      'vllm',
      'serve',
      '/var/lib/llmgw/cache/ab12/files',
      '--served-model-name',
      'llama-3-8b',
      'llama3',
      'chat',
      '--host',
      '0.0.0.0',
      '--port',
      '20001',
      '--tensor-parallel-size',
      '2',
      '--pipeline-parallel-size',
      '3',
      '--distributed-executor-backend',
      'mp',
      '--nnodes',
      '3',
      '--node-rank',
      '0',
      '--master-addr',
      '10.1.0.10',
      '--master-port',
      '29600',
    ]);
    expect(p.env).toEqual({ CUDA_VISIBLE_DEVICES: '2,3', VLLM_HOST_IP: '10.1.0.10' });
    expect(p.servesApi).toBe(true);
    expect(p.readiness.kind).toBe('http');
  });

  it('runs ranks ≥ 1 headless with no API, no port and nothing to probe', () => {
    const l = multi('vllm', 2);
    const p = plan(l);
    expect(p.argv).toEqual([
      'vllm',
      'serve',
      '/var/lib/llmgw/cache/ab12/files',
      '--tensor-parallel-size',
      '2',
      '--pipeline-parallel-size',
      '3',
      '--distributed-executor-backend',
      'mp',
      '--nnodes',
      '3',
      '--node-rank',
      '2',
      '--master-addr',
      '10.1.0.10',
      '--master-port',
      '29600',
      '--headless',
    ]);
    expect(p.env).toEqual({ CUDA_VISIBLE_DEVICES: '2,3', VLLM_HOST_IP: '10.1.0.12' });
    expect(p.readiness).toEqual({ kind: 'none' });
    expect(p.servesApi).toBe(false);
    expect(adapterFor('vllm', options).usesPort(l)).toBe(false);
  });

  it("uses vLLM's default master port when rank 0 names none", () => {
    const l = launch(
      'vllm',
      {
        rank: 1,
        peers: [
          { rank: 0, address: 'fd00::10' },
          { rank: 1, address: 'fd00::11' },
        ],
      },
      { shards: 2 },
    );
    expect(plan(l).argv).toContain('29501');
  });
});

describe('llamacpp', () => {
  it('serves one node with every layer on its GPUs and metrics on', () => {
    const p = plan(launch('llamacpp', { host: '127.0.0.1' }, { gpus: 2, args: ['-c', '8192', '--fit', 'off'] }));
    expect(p.argv).toEqual([
      'llama-server',
      '-m',
      '/var/lib/llmgw/cache/ab12/files/model-Q4_K_M.gguf',
      '--host',
      '127.0.0.1',
      '--port',
      '20001',
      '--alias',
      'llama-3-8b',
      '-ngl',
      '999',
      '--metrics',
      '-c',
      '8192',
      '--fit',
      'off',
    ]);
    expect(p.env).toEqual({ CUDA_VISIBLE_DEVICES: '2,3' });
    expect(p.readiness).toEqual({ kind: 'http', host: '127.0.0.1', port: 20001, path: '/health' });
  });

  it('keeps a CPU profile off every GPU', () => {
    const p = plan(launch('llamacpp', { gpuIndices: [] }, { gpus: 0 }));
    expect(p.argv.slice(p.argv.indexOf('-ngl'), p.argv.indexOf('-ngl') + 2)).toEqual(['-ngl', '0']);
    expect(p.env, 'an empty CUDA_VISIBLE_DEVICES hides every GPU').toEqual({ CUDA_VISIBLE_DEVICES: '' });
  });

  it('runs rank 0 of several nodes as llama-server over the other ranks as RPC devices', () => {
    const p = plan(multi('llamacpp', 0));
    expect(p.argv).toEqual([
      'llama-server',
      '-m',
      '/var/lib/llmgw/cache/ab12/files/model-Q4_K_M.gguf',
      '--host',
      '0.0.0.0',
      '--port',
      '20001',
      '--alias',
      'llama-3-8b',
      '-ngl',
      '999',
      '--metrics',
      '--rpc',
      '10.1.0.11:50060,10.1.0.12:50052',
    ]);
    expect(p.servesApi).toBe(true);
  });

  it('runs ranks ≥ 1 as rpc-server on the fabric address and its peer port, probed by TCP', () => {
    const l = multi('llamacpp', 1);
    const p = plan(l);
    expect(p.argv).toEqual(['rpc-server', '-H', '10.1.0.11', '-p', '50060']);
    expect(p.env).toEqual({ CUDA_VISIBLE_DEVICES: '2,3' });
    expect(p.readiness).toEqual({ kind: 'tcp', host: '10.1.0.11', port: 50060 });
    expect(p.servesApi).toBe(false);
    expect(p.probeWhileReady, "a connection beside the head's would only queue, so it is not probed once ready").toBe(
      false,
    );
    expect(adapterFor('llamacpp', options).usesPort(l), 'the rpc port comes from the peers, not the range').toBe(false);
    expect(plan(multi('llamacpp', 2)).argv).toEqual(['rpc-server', '-H', '10.1.0.12', '-p', '50052']);
  });

  // Regression: rpc-server was given the profile's args, which are
  // llama-server's; the real ggml-rpc-server exits on the first one it does
  // not know ("error: unknown argument"), so a two-node replica with any
  // profile args never started its rank 1.
  it("gives the profile's args to llama-server only, not to the rpc-server ranks", () => {
    const profile = { args: ['-c', '4096', '--fit', 'off'] };
    expect(plan(multi('llamacpp', 1, profile)).argv).toEqual(['rpc-server', '-H', '10.1.0.11', '-p', '50060']);
    expect(plan(multi('llamacpp', 0, profile)).argv.slice(-4), 'rank 0 still takes them last').toEqual([
      '-c',
      '4096',
      '--fit',
      'off',
    ]);
  });

  it('brackets IPv6 peers in the --rpc list', () => {
    const l = launch(
      'llamacpp',
      {
        peers: [
          { rank: 0, address: 'fd00::10' },
          { rank: 1, address: 'fd00::11', port: 50100 },
        ],
      },
      { shards: 2 },
    );
    expect(plan(l).argv).toContain('[fd00::11]:50100');
  });
});

describe('sglang', () => {
  it('serves one node with tensor parallel over its GPUs and metrics on', () => {
    const p = plan(launch('sglang', {}, { args: ['--mem-fraction-static', '0.85'] }));
    expect(p.argv).toEqual([
      'python3',
      '-m',
      'sglang.launch_server',
      '--model-path',
      '/var/lib/llmgw/cache/ab12/files',
      '--served-model-name',
      'llama-3-8b',
      '--host',
      '0.0.0.0',
      '--port',
      '20001',
      '--tp-size',
      '2',
      '--enable-metrics',
      '--mem-fraction-static',
      '0.85',
    ]);
    expect(p.env).toEqual({ CUDA_VISIBLE_DEVICES: '2,3' });
    expect(p.readiness).toEqual({ kind: 'http', host: '127.0.0.1', port: 20001, path: '/health' });
    expect(p.servesApi).toBe(true);
  });

  it('spans tensor parallel over every node and meets at rank 0; ranks ≥ 1 answer only /health', () => {
    const head = plan(multi('sglang', 0));
    const worker = plan(multi('sglang', 1));
    const tail = ['--tp-size', '6', '--enable-metrics', '--nnodes', '3'];
    expect(head.argv).toEqual([
      'python3',
      '-m',
      'sglang.launch_server',
      '--model-path',
      '/var/lib/llmgw/cache/ab12/files',
      '--served-model-name',
      'llama-3-8b',
      '--host',
      '0.0.0.0',
      '--port',
      '20001',
      ...tail,
      '--node-rank',
      '0',
      '--dist-init-addr',
      '10.1.0.10:29600',
    ]);
    expect(worker.argv, 'the same command, only --node-rank differs').toEqual(
      head.argv.map((arg, i) => (head.argv[i - 1] === '--node-rank' ? '1' : arg)),
    );
    expect(head.servesApi).toBe(true);
    expect(worker.servesApi).toBe(false);
    expect(worker.readiness).toEqual({ kind: 'http', host: '127.0.0.1', port: 20001, path: '/health' });
  });
});

describe('sim', () => {
  it("runs llmgw's own executable with every served name and the profile's sim flags", () => {
    const p = plan(
      launch('sim', { host: '127.0.0.1' }, { args: ['--ttft-ms', '5'], env: { LLMGW_SIM_RECORD: '/tmp/r.jsonl' } }),
    );
    expect(p.argv).toEqual([
      NODE,
      BIN,
      'engine',
      'sim',
      '--host',
      '127.0.0.1',
      '--port',
      '20001',
      '--model',
      'llama-3-8b',
      '--model',
      'llama3',
      '--model',
      'chat',
      '--ttft-ms',
      '5',
    ]);
    expect(p.env).toEqual({ CUDA_VISIBLE_DEVICES: '2,3', LLMGW_SIM_RECORD: '/tmp/r.jsonl' });
    expect(p.readiness).toEqual({ kind: 'http', host: '127.0.0.1', port: 20001, path: '/health' });
    expect(p.servesApi).toBe(true);
  });

  it('runs a sim on every rank of a multi-node profile; only rank 0 takes requests', () => {
    expect(plan(multi('sim', 0)).servesApi).toBe(true);
    const worker = plan(multi('sim', 2));
    expect(worker.servesApi).toBe(false);
    expect(worker.argv.slice(0, 4)).toEqual([NODE, BIN, 'engine', 'sim']);
  });
});

describe('builtin', () => {
  it('serves the GGUF file on the CPU with every name and the threads it was given', () => {
    const p = plan(
      launch('builtin', { host: '127.0.0.1', gpuIndices: [], threads: 6 }, { gpus: 0, args: ['--ctx-size', '2048'] }),
    );
    expect(p.argv).toEqual([
      NODE,
      BIN,
      'engine',
      'builtin',
      '--model',
      '/var/lib/llmgw/cache/ab12/files/model-Q4_K_M.gguf',
      '--host',
      '127.0.0.1',
      '--port',
      '20001',
      '--alias',
      'llama-3-8b',
      '--alias',
      'llama3',
      '--alias',
      'chat',
      '--threads',
      '6',
      '--ctx-size',
      '2048',
    ]);
    expect(p.env).toEqual({ CUDA_VISIBLE_DEVICES: '' });
    expect(p.readiness).toEqual({ kind: 'http', host: '127.0.0.1', port: 20001, path: '/health' });
  });

  it('leaves --threads to the engine when absent and refuses a multi-node profile', () => {
    expect(plan(launch('builtin', { gpuIndices: [] }, { gpus: 0 })).argv).not.toContain('--threads');
    expect(() => plan(multi('builtin', 0, { gpus: 0 }))).toThrow(/runs on one node/);
  });
});

describe('adapterFor', () => {
  it('refuses an unknown engine with LLMGW_ENGINE_UNKNOWN and the nearest name', () => {
    const err = catchError(() => adapterFor('vlm', options));
    expect(err.code).toBe('LLMGW_ENGINE_UNKNOWN');
    expect(err.message).toMatch(/did you mean vllm\?/);
  });

  it('asks for llmgwBin before running the sim or builtin engine', () => {
    expect(catchError(() => adapterFor('sim')).code).toBe('LLMGW_CONFIG_INVALID');
    expect(catchError(() => adapterFor('builtin', { nodePath: NODE })).message).toMatch(/llmgwBin/);
    expect(adapterFor('vllm').engine, 'the external engines need no llmgw path').toBe('vllm');
  });

  it('rejects an unknown option naming the nearest one', () => {
    expect(catchError(() => adapterFor('vllm', { vllmExecutables: 'x' } as EngineAdapterOptions)).message).toMatch(
      /did you mean "vllmExecutable"/,
    );
  });

  it('uses the executables it is given', () => {
    const custom = {
      vllmExecutable: '/venv/bin/vllm',
      pythonExecutable: '/venv/bin/python',
      llamaServerExecutable: '/opt/ll/llama-server',
      rpcServerExecutable: '/opt/ll/rpc-server',
      resolveGguf: options.resolveGguf!,
    };
    expect(adapterFor('vllm', custom).plan(launch('vllm')).argv[0]).toBe('/venv/bin/vllm');
    expect(adapterFor('sglang', custom).plan(launch('sglang')).argv[0]).toBe('/venv/bin/python');
    expect(adapterFor('llamacpp', custom).plan(launch('llamacpp')).argv[0]).toBe('/opt/ll/llama-server');
    expect(adapterFor('llamacpp', custom).plan(multi('llamacpp', 1)).argv[0]).toBe('/opt/ll/rpc-server');
  });

  it.each(ENGINE_NAMES.filter((e) => e !== 'builtin'))(
    '%s refuses peers out of rank order, a wrong count, or a rank outside them',
    (engine) => {
      const swapped = [PEERS[1]!, PEERS[0]!, PEERS[2]!];
      expect(catchError(() => plan(launch(engine, { peers: swapped }, { shards: 3 }))).message).toMatch(
        /ordered by rank/,
      );
      expect(catchError(() => plan(launch(engine, { peers: PEERS.slice(0, 2) }, { shards: 3 }))).message).toMatch(
        /3 shards but 2 peers/,
      );
      expect(catchError(() => plan(launch(engine, { peers: PEERS, rank: 3 }, { shards: 3 }))).code).toBe(
        'LLMGW_ENGINE_START_FAILED',
      );
      expect(catchError(() => plan(launch(engine, { rank: 1 }))).message).toMatch(/rank 0 only/);
    },
  );

  it.each(['vllm', 'llamacpp', 'sglang'])('%s refuses a shard given fewer GPUs than its profile runs on', (engine) => {
    const err = catchError(() => plan(launch(engine, { gpuIndices: [2] }, { gpus: 2 })));
    expect(err.code).toBe('LLMGW_ENGINE_START_FAILED');
    expect(err.message).toMatch(/2 GPUs per shard but 1 were given/);
  });
});

/** llama.cpp's ranks ≥ 1 run rpc-server, another program than the one the profile's args are for. */
const takesProfileArgs = (l: ShardLaunch): boolean => !(l.profile.engine === 'llamacpp' && l.rank > 0);

// What every adapter promises, whatever its engine: the contract the supervisor relies on.
describe.each(ENGINE_NAMES)('the %s adapter keeps the adapter contract', (engine) => {
  const shapes: [string, ShardLaunch][] = [['one node', launch(engine, {}, { gpus: engine === 'builtin' ? 0 : 2 })]];
  if (engine !== 'builtin') shapes.push(['multi-node head', multi(engine, 0)], ['multi-node rank 2', multi(engine, 2)]);

  it.each(shapes)('%s', (_shape, base) => {
    const l: ShardLaunch = {
      ...base,
      profile: {
        ...base.profile,
        args: ['--operator-flag', 'x'],
        env: { OPERATOR_VAR: '1', CUDA_VISIBLE_DEVICES: '7' },
      },
    };
    const adapter = adapterFor(engine, options);
    const p = adapter.plan(l);
    expect(
      p.argv.every((arg) => typeof arg === 'string' && arg !== ''),
      `no empty argument: ${JSON.stringify(p.argv)}`,
    ).toBe(true);
    if (takesProfileArgs(l))
      expect(p.argv.slice(-2), "the profile's args come last, so they win").toEqual(['--operator-flag', 'x']);
    else expect(p.argv, "rpc-server is given none of llama-server's args").not.toContain('--operator-flag');
    expect(p.env, "the profile's env is merged over llmgw's").toMatchObject({
      OPERATOR_VAR: '1',
      CUDA_VISIBLE_DEVICES: '7',
    });
    expect(p.servesApi, 'only rank 0 serves the API').toBe(l.rank === 0);
    if (adapter.usesPort(l)) {
      expect(p.readiness).toEqual({ kind: 'http', host: '127.0.0.1', port: l.port, path: '/health' });
      expect(p.argv).toContain(String(l.port));
    } else {
      expect(p.argv, 'a rank that takes no port from the range is not given one').not.toContain(String(l.port));
    }
    expect(adapter.defaultStartTimeoutMs).toBeGreaterThanOrEqual(60_000);
  });
});

/**
 * Where each engine takes the replica's secret: a variable it reads, out of
 * the world-readable command line. SGLang reads none, so it gets a 0600
 * --config file the supervisor writes (SGLANG_KEY_FILE).
 */
const KEY_VARIABLE: Partial<Record<EngineName, string>> = {
  vllm: 'VLLM_API_KEY',
  llamacpp: 'LLAMA_API_KEY',
  sim: 'LLMGW_ENGINE_API_KEY',
  builtin: 'LLMGW_ENGINE_API_KEY',
};
const SGLANG_KEY_FILE = `${SECRETS}/rep-1-s0.sglang.yaml`;

describe.each(ENGINE_NAMES)('%s takes the replica secret', (engine) => {
  // Engines took no credential: anyone who reached an engine port skipped keys, limits and accounting (issue 17).
  // Then sim, builtin and SGLang took it as --api-key=SECRET, which every user of the node read in ps (issue 33).
  const keyed = (l: ShardLaunch, apiKey = 'replica-secret'): ShardLaunch => ({
    ...l,
    apiKey,
    profile: { ...l.profile, args: ['--operator-flag', 'x'] },
  });
  const shapes: [string, ShardLaunch][] = [
    ['one node', keyed(launch(engine, {}, { gpus: engine === 'builtin' ? 0 : 2 }))],
  ];
  if (engine !== 'builtin')
    shapes.push(['multi-node head', keyed(multi(engine, 0))], ['multi-node rank 2', keyed(multi(engine, 2))]);
  const variable = KEY_VARIABLE[engine];

  it.each(shapes)('%s', (_shape, l) => {
    const p = adapterFor(engine, options).plan(l);
    // A command line is readable by every user of the node (ps, /proc/PID/cmdline); an environment or a 0600 file only by its owner.
    expect(
      p.argv.filter((a) => a.startsWith('--api-key')),
      `no --api-key on the command line ${JSON.stringify(p.argv)}`,
    ).toEqual([]);
    expect(p.argv.join(' '), 'the secret is nowhere on the command line').not.toContain('replica-secret');
    // The sim serves on every rank, so every rank asks the key; the real engines' other ranks serve no API.
    const asks = p.servesApi || engine === 'sim';
    if (variable !== undefined) {
      if (asks) expect(p.env[variable], `the secret in ${variable}`).toBe('replica-secret');
      else expect(p.env[variable], 'a rank that serves no API is given no key').toBeUndefined();
      expect(p.files, 'an engine that reads a variable is written no file').toBeUndefined();
    } else if (asks) {
      expect(p.files, 'SGLang gets its key in a --config file').toEqual([
        { path: SGLANG_KEY_FILE, text: 'api-key: "replica-secret"\n' },
      ]);
      expect(p.argv.slice(p.argv.indexOf('--config'), p.argv.indexOf('--config') + 2)).toEqual([
        '--config',
        SGLANG_KEY_FILE,
      ]);
      expect(Object.values(p.env), 'an engine that reads no key variable gets none').not.toContain('replica-secret');
    } else {
      expect(p.files, 'a rank that serves no API is given no key').toBeUndefined();
      expect(p.argv).not.toContain('--config');
    }
    if (takesProfileArgs(l))
      expect(p.argv.slice(-2), "the profile's args still come last").toEqual(['--operator-flag', 'x']);
  });

  if (variable !== undefined) {
    it('passes a secret that starts with "-" as it is', () => {
      // Secrets made before they were prefixed start with "-" one time in 64; stored, they stay the replica's for life.
      const p = adapterFor(engine, options).plan(
        keyed(launch(engine, {}, { gpus: engine === 'builtin' ? 0 : 2 }), '-Xk9_old-secret'),
      );
      expect(p.argv, `the secret is never an argument: ${JSON.stringify(p.argv)}`).not.toContain('-Xk9_old-secret');
      expect(p.env[variable]).toBe('-Xk9_old-secret');
    });

    it(`puts its own secret in ${variable} over a profile that sets one`, () => {
      const l = keyed(launch(engine, {}, { gpus: engine === 'builtin' ? 0 : 2, env: { [variable]: 'operator-key' } }));
      expect(adapterFor(engine, options).plan(l).env[variable], 'the key the router sends').toBe('replica-secret');
    });
  }

  it('asks no key when the control plane sent none', () => {
    const p = adapterFor(engine, options).plan(launch(engine, {}, { gpus: engine === 'builtin' ? 0 : 2 }));
    expect(p.argv.filter((a) => a.startsWith('--api-key') || a === '--config')).toEqual([]);
    expect(p.files).toBeUndefined();
    if (variable !== undefined) expect(p.env[variable]).toBeUndefined();
  });
});

describe('sglang refuses a key it could only be given on its command line', () => {
  const keyed = (over: Partial<ShardLaunch> = {}, args: string[] = []): ShardLaunch => ({
    ...launch('sglang', over, { args }),
    apiKey: 'replica-secret',
  });
  const refusal = (o: EngineAdapterOptions, l: ShardLaunch): string => {
    try {
      adapterFor('sglang', o).plan(l);
    } catch (err) {
      expect(err).toBeInstanceOf(LlmgwError);
      expect((err as LlmgwError).code).toBe('LLMGW_ENGINE_START_FAILED');
      return (err as LlmgwError).message;
    }
    throw new Error('the plan was not refused');
  };

  it('with no secrets directory to write the file in', () => {
    const { secretsDir: _none, ...withoutDir } = options;
    expect(refusal(withoutDir, keyed())).toContain('no secrets directory');
  });

  it('when the profile passes its own --config, which SGLang takes once', () => {
    expect(refusal(options, keyed({}, ['--config', '/etc/sglang.yaml']))).toContain('--config');
  });

  it('when the secret starts with "-", which SGLang would read from the file as a missing value', () => {
    expect(refusal(options, { ...keyed(), apiKey: '-Xk9_old-secret' })).toContain('starts with "-"');
  });

  it('names a shard id that is no plain file name by a hash, inside the secrets directory', () => {
    const p = adapterFor('sglang', options).plan(keyed({ shardId: '../../etc/passwd' }));
    expect(p.files?.[0]?.path).toMatch(new RegExp(`^${SECRETS}/shard-[0-9a-f]{16}\\.sglang\\.yaml$`));
  });
});

describe('with --engine-tls every process that serves the API serves https with the node certificate', () => {
  // Without it the router sent clients' prompts to engines in clear over the fleet network, and could not tell an engine from anything else on its port (issue 17).
  const tls: EngineAdapterOptions = {
    ...options,
    engineTls: { certFile: '/pki/node-gpu-1.pem', keyFile: '/pki/node-gpu-1-key.pem' },
  };
  const flags: Record<string, [string, string]> = {
    vllm: ['--ssl-certfile', '--ssl-keyfile'],
    llamacpp: ['--ssl-cert-file', '--ssl-key-file'],
    sglang: ['--ssl-certfile', '--ssl-keyfile'],
    sim: ['--tls-cert', '--tls-key'],
    builtin: ['--tls-cert', '--tls-key'],
  };

  it.each(ENGINE_NAMES)('%s: its own flag names, before the profile args, and an https probe', (engine) => {
    const l = launch(engine, {}, { gpus: engine === 'builtin' ? 0 : 2, args: ['--operator-flag', 'x'] });
    const p = adapterFor(engine, tls).plan(l);
    const [certFlag, keyFlag] = flags[engine]!;
    expect(p.argv[p.argv.indexOf(certFlag) + 1], `${certFlag} in ${JSON.stringify(p.argv)}`).toBe(
      '/pki/node-gpu-1.pem',
    );
    expect(p.argv[p.argv.indexOf(keyFlag) + 1], `${keyFlag} in ${JSON.stringify(p.argv)}`).toBe(
      '/pki/node-gpu-1-key.pem',
    );
    if (takesProfileArgs(l))
      expect(p.argv.slice(-2), "the profile's args still come last").toEqual(['--operator-flag', 'x']);
    expect(p.readiness).toEqual({ kind: 'http', host: '127.0.0.1', port: 20001, path: '/health', tls: true });
    const plain = adapterFor(engine, options).plan(l);
    expect(plain.argv, 'no TLS flag without --engine-tls').not.toContain(certFlag);
    expect(plain.readiness).not.toHaveProperty('tls');
  });

  it('gives no certificate to ranks that serve no API, and probes them as before', () => {
    const vllmWorker = adapterFor('vllm', tls).plan(multi('vllm', 1));
    expect(vllmWorker.argv).not.toContain('--ssl-certfile');
    expect(vllmWorker.readiness).toEqual({ kind: 'none' });
    const rpc = adapterFor('llamacpp', tls).plan(multi('llamacpp', 1));
    expect(rpc.argv).not.toContain('--ssl-cert-file');
    expect(rpc.readiness.kind).toBe('tcp');
    const sglangWorker = adapterFor('sglang', tls).plan(multi('sglang', 1));
    expect(sglangWorker.argv, "SGLang's dummy health server is left plain").not.toContain('--ssl-certfile');
    expect(sglangWorker.readiness).toEqual({ kind: 'http', host: '127.0.0.1', port: 20001, path: '/health' });
    const sglangHead = adapterFor('sglang', tls).plan(multi('sglang', 0));
    expect(sglangHead.readiness).toMatchObject({ tls: true });
  });

  it('refuses an engineTls without both files', () => {
    expect(catchError(() => adapterFor('vllm', { engineTls: { certFile: '/c.pem', keyFile: '' } })).message).toMatch(
      /engineTls.*certFile, keyFile/,
    );
  });
});

describe.each(ENGINE_NAMES)('%s refuses a profile env that would load code', (engine) => {
  // A profile env with NODE_OPTIONS=--import=data:… ran code on a GPU node through a tampered or careless control plane (issue 17).
  it('fails the launch naming the key, unless this agent allows it', () => {
    const l = launch(
      engine,
      {},
      {
        gpus: engine === 'builtin' ? 0 : 2,
        env: { OMP_NUM_THREADS: '4', NODE_OPTIONS: '--import=data:text/javascript,1' },
      },
    );
    const err = catchError(() => adapterFor(engine, options).plan(l));
    expect(err.code).toBe('LLMGW_ENGINE_START_FAILED');
    expect(err.message).toMatch(/NODE_OPTIONS is a loader or interpreter hook.*--allow-unsafe-profile-env/);
    expect(adapterFor(engine, { ...options, allowUnsafeProfileEnv: true }).plan(l).env).toMatchObject({
      NODE_OPTIONS: '--import=data:text/javascript,1',
    });
  });
});

describe('findGgufFile', () => {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-gguf-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const file = (path: string) => {
    mkdirSync(join(dir, path, '..'), { recursive: true });
    writeFileSync(join(dir, path), 'GGUF');
  };

  it("returns a .gguf path as it is and finds the one model under a cache entry's files/, skipping a projector", () => {
    expect(findGgufFile('/nowhere/model.gguf')).toBe('/nowhere/model.gguf');
    file('one/files/sub/model-Q8_0.gguf');
    file('one/files/sub/mmproj-model-f16.gguf');
    expect(findGgufFile(join(dir, 'one'))).toBe(join(dir, 'one/files/sub/model-Q8_0.gguf'));
  });

  it('loads a split model by its first part', () => {
    for (const part of ['00001', '00002', '00003']) file(`split/big-${part}-of-00003.gguf`);
    expect(findGgufFile(join(dir, 'split'))).toBe(join(dir, 'split/big-00001-of-00003.gguf'));
  });

  it('names the candidates when a directory holds several models, and says when it holds none', () => {
    file('two/a-Q4.gguf');
    file('two/a-Q8.gguf');
    expect(() => findGgufFile(join(dir, 'two'))).toThrow(/holds 2 GGUF models .*a-Q4\.gguf.*a-Q8\.gguf/);
    mkdirSync(join(dir, 'empty'));
    expect(() => findGgufFile(join(dir, 'empty'))).toThrow(/no \.gguf file/);
    expect(catchError(() => findGgufFile(join(dir, 'missing'))).code).toBe('LLMGW_ENGINE_START_FAILED');
  });
});

function catchError(fn: () => unknown): LlmgwError {
  try {
    fn();
  } catch (err) {
    if (err instanceof LlmgwError) return err;
    throw err;
  }
  throw new Error('expected an LlmgwError, none was thrown');
}
