// The sim and its stand-ins as processes, the way a supervisor runs engines:
// exit codes, the ready line, SIGTERM, and the start records adapter tests
// read. Spawns the built dist/ (the test global setup builds it).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { builtSimModulePath, writeStandIns, type StandIns } from '../../../test/support/engine-stand-ins.js';
import { readStartRecords } from './record.js';
import { StopWaiting, waitFor } from '../../../test/support/wait.js';

let dir: string;
let cliScript: string;
const children: ChildProcess[] = [];

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'llmgw-sim-'));
  cliScript = join(dir, 'sim-cli.mjs');
  writeFileSync(
    cliScript,
    `import { runSimEngineCli } from ${JSON.stringify(pathToFileURL(builtSimModulePath()).href)};\nawait runSimEngineCli(process.argv.slice(2));\n`,
  );
});

afterEach(() => {
  for (const child of children.splice(0))
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Running {
  readonly child: ChildProcess;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stdout(): string;
  stderr(): string;
  /** The first match of `re` on stdout, waiting for it until the deadline or the exit. */
  line(re: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
}

function run(command: string, args: string[], env: Record<string, string> = {}): Running {
  const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  let done = false;
  void exited.then(() => (done = true));
  return {
    child,
    exited,
    stdout: () => out,
    stderr: () => err,
    line(re, timeoutMs = 20_000) {
      return waitFor(
        () => `${re}; stdout: ${out} stderr: ${err}`,
        () => {
          if (done) throw new StopWaiting(`exited before printing ${re}; stdout: ${out} stderr: ${err}`);
          return re.exec(out) ?? undefined;
        },
        { timeoutMs, intervalMs: 10 },
      );
    },
  };
}

const chatBody = JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 });

describe('llmgw engine sim as a process', () => {
  it('prints its URL, records its start, and exits 0 on SIGTERM', async () => {
    const record = join(dir, 'sim-record.jsonl');
    const p = run(process.execPath, [cliScript, '--port', '0', '--model', 'm', '--ttft-ms', '1'], {
      LLMGW_SIM_RECORD: record,
      CUDA_VISIBLE_DEVICES: '1',
      HF_TOKEN: 'hf_secret_value',
    });
    const [, url] = await p.line(/^sim engine listening on (http:\/\/127\.0\.0\.1:\d+)$/m);
    const res = await fetch(`${url}/v1/chat/completions`, { method: 'POST', body: chatBody });
    expect(res.status).toBe(200);
    p.child.kill('SIGTERM');
    expect(await p.exited).toEqual({ code: 0, signal: null });
    const [entry] = readStartRecords(record);
    expect(entry?.program).toBe('sim');
    expect(entry?.argv).toEqual(['--port', '0', '--model', 'm', '--ttft-ms', '1']);
    expect(entry?.env.CUDA_VISIBLE_DEVICES).toBe('1');
    expect(entry?.env.HF_TOKEN, 'a secret is recorded as present, never its value').toBe('<redacted>');
  });

  it('exits with code 1 after --crash-after N requests', async () => {
    const p = run(process.execPath, [cliScript, '--crash-after', '2']);
    const [, url] = await p.line(/listening on (\S+)/);
    for (let i = 0; i < 2; i++) {
      const res = await fetch(`${url}/v1/chat/completions`, { method: 'POST', body: chatBody });
      expect(res.status, `request ${i + 1} is still served`).toBe(200);
      await res.text();
    }
    expect((await p.exited).code).toBe(1);
    expect(p.stderr()).toContain('--crash-after 2');
  });

  it('exits 2 on a mistyped flag, naming the nearest one', async () => {
    const p = run(process.execPath, [cliScript, '--ttft', '5']);
    expect((await p.exited).code).toBe(2);
    expect(p.stderr()).toContain('did you mean --ttft-ms?');
  });
});

describe('stand-in executables', () => {
  let standIns: StandIns;

  beforeAll(() => {
    standIns = writeStandIns(join(dir, 'bin'));
  });

  it('vllm records argv and env, then serves its served names like sim', async () => {
    const args = [
      'serve',
      '/models/llama',
      '--served-model-name',
      'llama',
      'llama-alias',
      '--host',
      '127.0.0.1',
      '--port',
      '0',
      '-tp',
      '2',
      '--max-model-len',
      '1k',
    ];
    const p = run(standIns.paths.vllm, args, { CUDA_VISIBLE_DEVICES: '2,3', NCCL_SOCKET_IFNAME: 'ib0' });
    const [, url] = await p.line(/Starting vLLM API server 0 on (http:\/\/127\.0\.0\.1:\d+)/);
    const health = await fetch(`${url}/health`);
    expect(health.status).toBe(200);
    const models = (await (await fetch(`${url}/v1/models`)).json()) as {
      data: { id: string; max_model_len: number }[];
    };
    expect(models.data.map((m) => m.id)).toEqual(['llama', 'llama-alias']);
    expect(models.data[0]!.max_model_len, '--max-model-len 1k, read as vLLM reads it').toBe(1000);
    const record = standIns.records().find((r) => r.pid === p.child.pid);
    expect(record?.program).toBe('vllm');
    expect(record?.argv).toEqual(args);
    expect(record?.env).toMatchObject({ CUDA_VISIBLE_DEVICES: '2,3', NCCL_SOCKET_IFNAME: 'ib0' });
    p.child.kill('SIGTERM');
    expect((await p.exited).code).toBe(0);
  });

  it('llama-server serves its aliases with llama.cpp metric names', async () => {
    const p = run(standIns.paths['llama-server'], [
      '-m',
      '/models/q.gguf',
      '--alias',
      'q,q-chat',
      '--port',
      '0',
      '-ngl',
      '999',
    ]);
    const [, url] = await p.line(/server is listening on (http:\/\/\S+) - starting the main loop/);
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      body: JSON.stringify({ model: 'q-chat', messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(((await res.json()) as { model: string }).model).toBe('q-chat');
    expect(await (await fetch(`${url}/metrics`)).text()).toContain('llamacpp:requests_processing 0');
    p.child.kill('SIGTERM');
    expect((await p.exited).code).toBe(0);
  });

  it('rpc-server accepts TCP connections and stays up; a vllm headless rank opens no port and stays up', async () => {
    const rpc = run(standIns.paths['rpc-server'], ['-H', '127.0.0.1', '-p', '0']);
    const [, port] = await rpc.line(/endpoint\s+: 127\.0\.0\.1:(\d+)/);
    const connected = await new Promise<boolean>((resolve) => {
      const socket = connect({ port: Number(port), host: '127.0.0.1' }, () => {
        socket.destroy();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
    expect(connected, 'a TCP probe of the rpc-server port succeeds').toBe(true);
    const headless = run(standIns.paths.vllm, ['serve', '/models/llama', '--headless', '--node-rank', '1']);
    await headless.line(/headless rank/);
    for (const p of [rpc, headless]) {
      expect(p.child.exitCode, 'still up').toBeNull();
      p.child.kill('SIGTERM');
      expect((await p.exited).code).toBe(0);
    }
  });

  it('python -m sglang.launch_server serves rank 0 and only /health on rank 1; other python exits 1', async () => {
    const rank0 = run(standIns.paths.python3, [
      '-m',
      'sglang.launch_server',
      '--model-path',
      '/m/qwen',
      '--served-model-name',
      'qwen',
      '--port',
      '0',
    ]);
    await rank0.line(/fired up and ready to roll/);
    const rank1 = run(standIns.paths.python, [
      '-m',
      'sglang.launch_server',
      '--model-path',
      '/m/qwen',
      '--node-rank',
      '1',
      '--port',
      '0',
    ]);
    const [, port] = await rank1.line(/dummy health server on http:\/\/127\.0\.0\.1:(\d+)/);
    expect((await fetch(`http://127.0.0.1:${port}/health`)).status).toBe(200);
    expect((await fetch(`http://127.0.0.1:${port}/v1/models`)).status).toBe(404);
    const other = run(standIns.paths.python, ['script.py']);
    expect((await other.exited).code).toBe(1);
    expect(other.stderr()).toContain('only `-m sglang.launch_server`');
    for (const p of [rank0, rank1]) {
      p.child.kill('SIGTERM');
      expect((await p.exited).code).toBe(0);
    }
  });

  it('fails on demand with LLMGW_STANDIN_EXIT, after recording', async () => {
    const p = run(standIns.paths.vllm, ['serve', '/m'], {
      LLMGW_STANDIN_EXIT: '1:torch.OutOfMemoryError: CUDA out of memory',
    });
    expect((await p.exited).code).toBe(1);
    expect(p.stderr()).toContain('CUDA out of memory');
    expect(
      standIns.records().some((r) => r.pid === p.child.pid),
      'recorded before failing',
    ).toBe(true);
  });

  it('takes sim behaviour from LLMGW_STANDIN_SIM_ARGS: a startup delay answers 503 loading', async () => {
    const p = run(standIns.paths['llama-server'], ['-m', '/m.gguf', '--port', '0'], {
      LLMGW_STANDIN_SIM_ARGS: '--startup-delay-ms 600000',
    });
    const [, url] = await p.line(/listening on (http:\/\/\S+)/);
    const health = await fetch(`${url}/health`);
    expect(health.status).toBe(503);
    p.child.kill('SIGTERM');
    expect((await p.exited).code).toBe(0);
  });
});
