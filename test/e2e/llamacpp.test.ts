// The real llama.cpp under llmgw, end to end on loopback: a control plane and
// real agents (probing this machine, not --simulate) that find llama-server
// and the RPC server on their PATH, built by `npm run engines:llamacpp` from
// the source node-llama-cpp ships; the tiny generated GGUF as the model. Every
// other engine test runs llmgw's own sim or builtin engine, so this is where
// the llamacpp adapter meets the program it writes command lines for: its
// flags, its readiness (/health answers 503 while the model loads), its
// answers and usage through the router, a client that goes away mid-stream,
// an engine killed or hung under its agent, and a replica over two nodes
// (ggml-rpc-server on rank 1, llama-server --rpc on rank 0).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { parseLlamaServerVersion } from '../../src/agent/probe/engines.js';
import type { CreatedKeyView, ReplicaView, UsageView } from '../../src/api/index.js';
import { makeTinyModel } from '../../src/dev/make-model/index.js';
import { ADMIN, adminHeaders, afterPasses, engineRecordOf, JOIN, postJson, replicasOf } from '../support/fleet.js';
import { describeWithLlamaCpp, type LlamaCppBinaries } from '../support/llamacpp.js';
import {
  type ControlUrls,
  killEnginesOf,
  type RunningProcess,
  startControl,
  startLlmgw,
  stopAll,
} from '../support/processes.js';
import { waitFor } from '../support/wait.js';

/**
 * llama-server's ignore_eos: the tiny model's random weights pick its
 * end-of-text token now and then, which would make an answer's length, and
 * whether a stream lasts long enough to be aborted, a matter of luck.
 */
const WHOLE_ANSWER = { ignore_eos: true } as object;

const stateDirs: string[] = [];
/** Engines a test stopped with SIGSTOP: continued in cleanup, so that a failed test leaves nothing frozen. */
const frozen = new Set<number>();

afterAll(async () => {
  for (const pid of frozen) signal(pid, 'SIGCONT');
  await stopAll();
  killEnginesOf(stateDirs);
});

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // Already gone.
  }
}

/** A real agent with the built llama.cpp first on its PATH, which is how it finds engines (the probe and the adapter alike). */
function startRealAgent(
  binaries: LlamaCppBinaries,
  control: string,
  dir: string,
  id: string,
  ports: string,
  extra: string[] = [],
): RunningProcess {
  const stateDir = join(dir, id);
  stateDirs.push(stateDir);
  return startLlmgw(
    [
      'agent',
      '--control',
      control,
      '--join-token',
      JOIN,
      '--node-id',
      id,
      '--state-dir',
      stateDir,
      '--heartbeat-interval',
      '300ms',
      '--port-range',
      ports,
      '--log-level',
      'warn',
      ...extra,
    ],
    { env: { PATH: `${binaries.dir}:${process.env.PATH ?? '/usr/bin:/bin'}` } },
  );
}

async function startPlane(dir: string): Promise<{ urls: ControlUrls }> {
  return startControl([
    '--store',
    `sqlite:${join(dir, 'db')}`,
    '--join-token',
    JOIN,
    '--admin-token',
    ADMIN,
    '--reconcile-interval',
    '300ms',
    '--log-level',
    'warn',
  ]);
}

async function nodesUp(admin: string, count: number): Promise<void> {
  await waitFor(`${count} nodes up`, async () => {
    const nodes = (await (await fetch(`${admin}/api/v1/nodes`, { headers: adminHeaders })).json()) as {
      liveness: string;
    }[];
    return nodes.length === count && nodes.every((n) => n.liveness === 'up');
  });
}

async function addModel(admin: string, def: Record<string, unknown>): Promise<void> {
  const res = await postJson(`${admin}/api/v1/models`, def);
  expect(res.status, await res.clone().text()).toBe(200);
}

/** The one ready replica of `model`, once there is one; the failure says what the replicas were doing instead. */
async function readyReplica(admin: string, model: string, timeoutMs = 120_000): Promise<ReplicaView> {
  let last: ReplicaView[] = [];
  return waitFor(
    () => `a ready ${model} replica; last seen: ${JSON.stringify(last)}`,
    async () => {
      last = await replicasOf(admin, model);
      return last.length === 1 && last[0]!.state === 'ready' ? last[0] : undefined;
    },
    { timeoutMs, intervalMs: 200 },
  );
}

async function newKey(admin: string, name: string): Promise<CreatedKeyView> {
  const res = await postJson(`${admin}/api/v1/keys`, { name });
  expect(res.status, await res.clone().text()).toBe(201);
  return (await res.json()) as CreatedKeyView;
}

/** A process's command line as it was started (each argument ends in a NUL). */
function argvOf(pid: number): string[] {
  return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').slice(0, -1);
}

/** Whether a process runs (or is stopped): a zombie or a missing pid is not. */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^\d+ \(.*\) Z /.test(stat);
  } catch {
    return false;
  }
}

describeWithLlamaCpp('the real llama.cpp under llmgw', (binaries) => {
  let dir: string;
  let control: { urls: ControlUrls };
  let agent: RunningProcess;
  let client: OpenAI;
  let key: CreatedKeyView;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-e2e-llamacpp-'));
    const gguf = join(dir, 'tiny.gguf');
    await makeTinyModel(gguf, { seed: 7 });
    control = await startPlane(dir);
    // A short liveness window, so a hung engine is caught in seconds: probed every 500 ms, stopped after 2 failures.
    agent = startRealAgent(binaries, control.urls.agent, dir, 'l1', '28000-28049', [
      '--liveness-interval',
      '500ms',
      '--liveness-failures',
      '2',
    ]);
    await nodesUp(control.urls.admin, 1);
    await addModel(control.urls.admin, {
      name: 'tiny-llama',
      aliases: ['tl'],
      source: `file://${gguf}`,
      profiles: [{ engine: 'llamacpp', gpus: 0, memory_gb: 1 }],
    });
    key = await newKey(control.urls.admin, 'llamacpp-e2e');
    client = new OpenAI({ baseURL: `${control.urls.client}/v1`, apiKey: key.secret, maxRetries: 0 });
  }, 120_000);

  it("reads the real llama-server's version, in the form the probe reports", () => {
    const run = spawnSync(binaries.llamaServer, ['--version'], { encoding: 'utf8', timeout: 30_000 });
    const output = `${run.stdout}\n${run.stderr}`;
    expect(parseLlamaServerVersion(output), `llama-server --version printed:\n${output}`).toMatch(
      /^\S+ b\d+ \([0-9a-f]+\)$/,
    );
  });

  it('places a replica through the llamacpp adapter on a real agent, and serves chat through the router', async () => {
    const replica = await readyReplica(control.urls.admin, 'tiny-llama');
    expect(
      replica.shards.map((s) => s.node),
      'on the one node',
    ).toEqual(['l1']);
    const record = engineRecordOf(stateDirs, replica.id);
    const cmdline = argvOf(record.pid);
    expect(cmdline[0], "the real llama-server from the agent's PATH").toMatch(/llama-server$/);
    expect(cmdline, 'no secret on the world-readable command line').not.toContain(record.launch.apiKey);
    const bare = await fetch(`${replica.endpoint}/v1/models`);
    expect(bare.status, 'llama-server read its key from LLAMA_API_KEY and refuses a request without it').toBe(401);
    await bare.arrayBuffer();
    const metrics = await fetch(`${replica.endpoint}/metrics`, {
      headers: { authorization: `Bearer ${record.launch.apiKey}` },
    });
    expect(metrics.status, 'the adapter turned /metrics on (--metrics)').toBe(200);
    expect(await metrics.text(), "with llama.cpp's own gauges").toMatch(/^llamacpp:requests_processing /m);

    const reply = await client.chat.completions.create({
      model: 'tiny-llama',
      messages: [{ role: 'user', content: 'Hello there' }],
      max_tokens: 8,
      ...WHOLE_ANSWER,
    });
    expect(reply.choices[0]!.message.role).toBe('assistant');
    expect(reply.usage?.prompt_tokens, 'llama.cpp counted the prompt').toBeGreaterThan(0);
    expect(reply.usage?.completion_tokens, 'the whole answer asked for').toBe(8);

    const byAlias = await client.chat.completions.create({
      model: 'tl',
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 2,
      ...WHOLE_ANSWER,
    });
    expect(byAlias.usage?.completion_tokens, 'an alias reaches the same engine').toBe(2);
  });

  it('streams, with the usage chunk llama.cpp sends when asked, and counts every request in /api/v1/usage', async () => {
    // The two answers of the test before, once the router has written them down.
    const before = await usageOnceCounted(control.urls.admin, key.id, 'tiny-llama', 2);
    const stream = await client.chat.completions.create({
      model: 'tiny-llama',
      messages: [{ role: 'user', content: 'Count to ten' }],
      max_tokens: 12,
      ...WHOLE_ANSWER,
      stream: true,
      stream_options: { include_usage: true },
    });
    let chunks = 0;
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      chunks++;
      if (chunk.usage) usage = chunk.usage;
    }
    expect(chunks, 'more than the usage chunk arrived').toBeGreaterThan(1);
    expect(usage?.completion_tokens, 'the final chunk carries usage').toBe(12);

    const after = await usageOnceCounted(control.urls.admin, key.id, 'tiny-llama', 3);
    expect(after.completion_tokens - before.completion_tokens, 'the router counted what the engine reported').toBe(
      usage!.completion_tokens,
    );
    expect(after.prompt_tokens - before.prompt_tokens).toBe(usage!.prompt_tokens);
  });

  it("counts a Messages stream's prompt for message_start with llama.cpp's own template and tokenizer", async () => {
    // Guards against message_start saying input_tokens 0 on llama.cpp, whose /tokenize takes text only.
    const anthropic = new Anthropic({ baseURL: control.urls.client, apiKey: key.secret, maxRetries: 0 });
    const params = {
      model: 'tiny-llama',
      max_tokens: 4,
      system: 'Be brief.',
      messages: [{ role: 'user' as const, content: 'Tell me about rivers.' }],
    };
    const stream = anthropic.messages.stream(params);
    let start: number | null = null;
    stream.on('streamEvent', (e) => {
      if (e.type === 'message_start') start = e.message.usage.input_tokens;
    });
    const final = await stream.finalMessage();
    expect(final.usage.input_tokens, 'llama.cpp counted the prompt').toBeGreaterThan(0);
    expect(start, 'message_start said the count llama.cpp reports at the end').toBe(final.usage.input_tokens);
    const counted = await anthropic.messages.countTokens({
      model: params.model,
      system: params.system,
      messages: params.messages,
    });
    expect(counted.input_tokens, 'count_tokens agrees').toBe(final.usage.input_tokens);
  });

  it('survives a client that goes away mid-stream: the same engine serves the next request', async () => {
    const replica = await readyReplica(control.urls.admin, 'tiny-llama');
    const pid = engineRecordOf(stateDirs, replica.id).pid;
    const abort = new AbortController();
    // llama-server keeps the tiny model's 256-token context in one cache for all its sequences (the earlier tests'
    // cached prompts too), and may still be generating for the client that left when the next request arrives. When a
    // decode finds no room it fails every sequence in the batch with 500 "Context size has been exceeded"
    // (server-context.cpp): at 200 tokens a CI run failed the next request so. At 100 they fit side by side, so what
    // is tested is the abort, not the engine's room.
    const stream = await client.chat.completions.create(
      {
        model: 'tiny-llama',
        messages: [{ role: 'user', content: 'Tell me a long story' }],
        max_tokens: 100,
        ...WHOLE_ANSWER,
        stream: true,
      },
      { signal: abort.signal },
    );
    let seen = 0;
    let finished: string | null = null;
    // Chunks that arrived in the same read as the second are already buffered in the client: stop reading, then go.
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta.content !== undefined) seen++;
      finished = chunk.choices[0]?.finish_reason ?? finished;
      if (seen === 2) break;
    }
    abort.abort();
    expect(seen, 'the client read two tokens, then went away').toBe(2);
    expect(finished, 'before the engine finished the answer').toBeNull();

    const next = await client.chat.completions.create({
      model: 'tiny-llama',
      messages: [{ role: 'user', content: 'Still there?' }],
      max_tokens: 3,
      ...WHOLE_ANSWER,
    });
    expect(next.usage?.completion_tokens, 'the next request is answered').toBeGreaterThan(0);
    expect(engineRecordOf(stateDirs, replica.id).pid, 'by the same engine process').toBe(pid);
    expect((await readyReplica(control.urls.admin, 'tiny-llama')).id, 'and the same replica').toBe(replica.id);
  });

  it('restarts an engine killed with SIGKILL in place: same replica, same node, a new process that serves', async () => {
    const replica = await readyReplica(control.urls.admin, 'tiny-llama');
    const first = engineRecordOf(stateDirs, replica.id).pid;
    process.kill(first, 'SIGKILL');
    const again = await waitFor(
      'the engine started again under the same replica, its model loaded',
      async () => {
        const list = await replicasOf(control.urls.admin, 'tiny-llama');
        const record = engineRecordOf(stateDirs, replica.id);
        if (list.length !== 1 || list[0]!.state !== 'ready' || record.pid === first) return undefined;
        // The new pid is on disk as the process starts, and the replica can still read ready from before the kill
        // until the agent's next report reaches the control plane: llama-server's /health says when it has loaded.
        const health = await fetch(`${list[0]!.endpoint}/health`, {
          headers: { authorization: `Bearer ${record.launch.apiKey}` },
        });
        await health.arrayBuffer();
        return health.status === 200 ? { view: list[0]!, pid: record.pid } : undefined;
      },
      { timeoutMs: 90_000, intervalMs: 200 },
    );
    expect(again.view.id, 'the agent restarts in place; the control plane places nothing new').toBe(replica.id);
    expect(again.view.shards[0]!.node).toBe('l1');
    expect(alive(first), 'the killed process is gone').toBe(false);
    const reply = await client.chat.completions.create({
      model: 'tiny-llama',
      messages: [{ role: 'user', content: 'Back?' }],
      max_tokens: 2,
      ...WHOLE_ANSWER,
    });
    expect(reply.usage?.completion_tokens).toBeGreaterThan(0);
  });

  it('catches a stopped (SIGSTOP) engine with the liveness probe and replaces the process', async () => {
    const replica = await readyReplica(control.urls.admin, 'tiny-llama');
    const hung = engineRecordOf(stateDirs, replica.id).pid;
    frozen.add(hung);
    process.kill(hung, 'SIGSTOP');
    // The agent's rule: probed every 500 ms, stopped after 2 failures in a row, then restarted like a crash.
    const failed = await agent.waitForLog(
      (e) => typeof e.msg === 'string' && /liveness probe failed \(2 of 2\)/.test(e.msg),
      60_000,
    );
    expect(failed.level, 'logged as a warning').toBe(40);
    const again = await waitFor(
      'a new engine process ready for the same replica',
      async () => {
        const list = await replicasOf(control.urls.admin, 'tiny-llama');
        const pid = engineRecordOf(stateDirs, replica.id).pid;
        return list.length === 1 && list[0]!.state === 'ready' && pid !== hung ? { view: list[0]!, pid } : undefined;
      },
      { timeoutMs: 90_000, intervalMs: 200 },
    );
    expect(again.view.id).toBe(replica.id);
    expect(alive(hung), 'the hung process was killed, stopped as it was').toBe(false);
    frozen.delete(hung);
    const reply = await client.chat.completions.create({
      model: 'tiny-llama',
      messages: [{ role: 'user', content: 'Awake?' }],
      max_tokens: 2,
      ...WHOLE_ANSWER,
    });
    expect(reply.usage?.completion_tokens).toBeGreaterThan(0);
  });
});

describeWithLlamaCpp('a llama.cpp replica over two nodes', (binaries) => {
  it('runs ggml-rpc-server on rank 1 and llama-server --rpc on rank 0, on two agents of one machine, and serves through the router', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-e2e-llamacpp-rpc-'));
    const gguf = join(dir, 'tiny.gguf');
    await makeTinyModel(gguf, { seed: 11 });
    const control = await startPlane(dir);
    // Two nodes on one machine: each its own state dir, port range and engine address, on one fabric over loopback.
    // A short liveness window on both, so that a probe which disturbs the rpc-server would show within the test.
    const liveness = ['--liveness-interval', '500ms', '--liveness-failures', '2'];
    startRealAgent(binaries, control.urls.agent, dir, 'm1', '28050-28099', [
      '--engine-host',
      '127.0.0.1',
      '--fabric',
      'lo=127.0.0.1',
      ...liveness,
    ]);
    startRealAgent(binaries, control.urls.agent, dir, 'm2', '28100-28149', [
      '--engine-host',
      '127.0.0.2',
      '--fabric',
      'lo=127.0.0.2',
      ...liveness,
    ]);
    await nodesUp(control.urls.admin, 2);
    await addModel(control.urls.admin, {
      name: 'split',
      source: `file://${gguf}`,
      profiles: [{ engine: 'llamacpp', gpus: 0, shards: 2, memory_gb: 1 }],
    });

    const replica = await readyReplica(control.urls.admin, 'split', 180_000);
    expect(replica.fabric, 'placed on the shared fabric').toBe('lo');
    expect(new Set(replica.shards.map((s) => s.node)), 'one shard on each node').toEqual(new Set(['m1', 'm2']));
    const head = replica.shards.find((s) => s.rank === 0)!;
    const tail = replica.shards.find((s) => s.rank === 1)!;
    const headPid = engineRecordOf([join(dir, head.node)], replica.id).pid;
    const tailPid = engineRecordOf([join(dir, tail.node)], replica.id).pid;
    const headArgv = argvOf(headPid);
    const tailArgv = argvOf(tailPid);
    const tailAddress = tail.node === 'm1' ? '127.0.0.1' : '127.0.0.2';
    expect(tailArgv[0], 'rank 1 runs the RPC server under its current name').toMatch(/ggml-rpc-server$/);
    expect(tailArgv.slice(1), 'bound to its fabric address on the default RPC port').toEqual([
      '-H',
      tailAddress,
      '-p',
      '50052',
    ]);
    expect(headArgv[0]).toMatch(/llama-server$/);
    expect(headArgv[headArgv.indexOf('--rpc') + 1], 'rank 0 reaches rank 1 over the fabric').toBe(
      `${tailAddress}:50052`,
    );

    const key = await newKey(control.urls.admin, 'rpc-e2e');
    const client = new OpenAI({ baseURL: `${control.urls.client}/v1`, apiKey: key.secret, maxRetries: 0 });
    const reply = await client.chat.completions.create({
      model: 'split',
      messages: [{ role: 'user', content: 'Hello over RPC' }],
      max_tokens: 6,
      ...WHOLE_ANSWER,
    });
    expect(reply.usage?.completion_tokens, 'the two-node replica answers').toBeGreaterThan(0);
    const tailLog = readFileSync(join(dir, tail.node, 'logs', `${tail.id}.log`), 'utf8');
    expect(tailLog, 'the RPC server lent its device to the head').toMatch(/^Accepted client connection$/m);

    // Many liveness intervals later (30 reconciler passes of 300 ms), both ranks are the processes they were:
    // rpc-server serves only the head, so the agent must not probe it once ready.
    await afterPasses(control.urls.admin, 30);
    expect(
      engineRecordOf([join(dir, tail.node)], replica.id).pid,
      'rank 1 was never taken for hung and restarted',
    ).toBe(tailPid);
    expect(engineRecordOf([join(dir, head.node)], replica.id).pid, 'nor rank 0').toBe(headPid);
    const later = await client.chat.completions.create({
      model: 'split',
      messages: [{ role: 'user', content: 'Still split?' }],
      max_tokens: 3,
      ...WHOLE_ANSWER,
    });
    expect(later.usage?.completion_tokens, 'and the replica still answers').toBeGreaterThan(0);
  });
});

/** The usage row of `keyId` and `model` once it counts `requests` requests (the router writes usage down after answering). */
async function usageOnceCounted(admin: string, keyId: string, model: string, requests: number): Promise<UsageView> {
  let last: UsageView | undefined;
  return waitFor(
    () => `${requests} requests of ${model} in /api/v1/usage; last seen: ${JSON.stringify(last)}`,
    async () => {
      const rows = (await (await fetch(`${admin}/api/v1/usage`, { headers: adminHeaders })).json()) as UsageView[];
      last = rows.find((r) => r.key_id === keyId && r.model === model);
      return last?.requests === requests ? last : undefined;
    },
    { timeoutMs: 20_000, intervalMs: 200 },
  );
}
