// The supervisor over real processes on loopback: the sim engine through a
// stand-in for bin/llmgw.js, the engine stand-ins (vllm, llama-server,
// rpc-server, python3) running the exact command lines the adapters build,
// and a small node script whose grandchild ignores SIGTERM. Every wait polls
// a condition against a deadline. Spawns the built dist/ (the test global
// setup builds it).
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { builtSimModulePath, writeStandIns, type StandIns } from '../../../test/support/engine-stand-ins.js';
import { adapterFor, type EngineAdapter, type ShardLaunch } from '../engines/index.js';
import { Supervisor, type ShardStatus, type SupervisorOptions } from './index.js';
import { fileNameFor, type ShardRecord } from './shard-records.js';
import { linuxProcessTable } from './process-table.js';
import { CapturingLogger } from '../../../test/support/supervisor-fakes.js';
import { waitFor } from '../../../test/support/wait.js';

const table = linuxProcessTable();
let root: string;
let llmgwBin: string;
let engineScript: string;
let standIns: StandIns;
let dir: string;
let logger: CapturingLogger;
const live: Supervisor[] = [];
const pids = new Set<number>();

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'llmgw-supervisor-proc-'));
  // bin/llmgw.js's `engine sim`, without depending on the CLI being wired: the same runSimEngineCli it will call.
  llmgwBin = join(root, 'llmgw-test-bin.mjs');
  writeFileSync(
    llmgwBin,
    [
      `import { runSimEngineCli } from ${JSON.stringify(pathToFileURL(builtSimModulePath()).href)};`,
      'const [group, engine, ...rest] = process.argv.slice(2);',
      "if (group !== 'engine' || engine !== 'sim') { process.stderr.write('test llmgw: only `engine sim`\\n'); process.exit(2); }",
      'await runSimEngineCli(rest);',
      '',
    ].join('\n'),
  );
  // An engine that forks a worker which ignores SIGTERM, as a wedged vLLM worker might.
  engineScript = join(root, 'forking-engine.mjs');
  writeFileSync(
    engineScript,
    [
      "import { spawn } from 'node:child_process';",
      "import { createServer } from 'node:http';",
      "spawn(process.execPath, ['-e', \"process.on('SIGTERM', () => console.log('worker ignores SIGTERM')); console.log('worker ' + process.pid); setInterval(() => {}, 1000);\"], { stdio: 'inherit' });",
      "createServer((req, res) => res.end('ok')).listen(Number(process.argv[2]), '127.0.0.1', () => console.log('engine ' + process.pid + ' listening'));",
      '',
    ].join('\n'),
  );
  standIns = writeStandIns(join(root, 'stand-ins'));
});

afterAll(() => rmSync(root, { recursive: true, force: true }));

afterEach(async () => {
  for (const s of live.splice(0)) await s.stop().catch(() => undefined);
  // Engines a test left running on purpose (detached, refused adoption): end their groups by the pids we saw.
  for (const pid of pids) if (table.identity(pid)) table.signalGroup(pid, 'SIGKILL');
  pids.clear();
});

const scriptAdapter: EngineAdapter = {
  engine: 'sim',
  defaultStartTimeoutMs: 20_000,
  usesPort: () => true,
  plan: (l) => ({
    argv: [process.execPath, engineScript, String(l.port)],
    env: {},
    readiness: { kind: 'http', host: '127.0.0.1', port: l.port, path: '/health' },
    servesApi: true,
  }),
};

async function supervisor(overrides: Partial<SupervisorOptions> = {}, dirs?: string): Promise<Supervisor> {
  dir = dirs ?? mkdtempSync(join(root, 'case-'));
  const s = await Supervisor.create({
    logsDir: join(dir, 'logs'),
    stateDir: join(dir, 'state'),
    logger,
    adapterFor: (engine) =>
      engine === 'script'
        ? scriptAdapter
        : adapterFor(engine, { llmgwBin, secretsDir: join(dir, 'state', 'engine-secrets') }),
    // Ports the kernel gives out for port 0 are far from here; other tests on this machine bind-test too.
    firstPort: 24000 + (process.pid % 50) * 20,
    lastPort: 24000 + (process.pid % 50) * 20 + 19,
    stopGraceMs: 3_000,
    readinessPollInitialMs: 20,
    readinessPollMaxMs: 200,
    restartPolicy: { baseDelayMs: 100, jitterRatio: 0 },
    baseEnv: { PATH: `${standIns.dir}:${process.env.PATH ?? '/usr/bin:/bin'}`, HOME: root },
    ...overrides,
  });
  live.push(s);
  return s;
}

function simLaunch(shardId: string, args: string[] = [], overrides: Partial<ShardLaunch> = {}): ShardLaunch {
  return {
    replicaId: 'rep-1',
    shardId,
    model: { name: 'tiny', aliases: ['tiny-chat'] },
    profile: { name: 'cpu', engine: 'sim', gpus: 0, shards: 1, args, env: {} },
    weightsPath: '/weights/tiny',
    gpuIndices: [],
    host: '127.0.0.1',
    port: 0,
    rank: 0,
    peers: [],
    ...overrides,
  };
}

function statusOf(s: Supervisor, shardId: string): ShardStatus | undefined {
  const status = s.status().find((x) => x.shardId === shardId);
  if (status?.pid) pids.add(status.pid);
  return status;
}

function whenState(
  s: Supervisor,
  shardId: string,
  state: ShardStatus['state'],
  timeoutMs?: number,
): Promise<ShardStatus> {
  return waitFor(
    () => `shard ${shardId} to be ${state} (now ${JSON.stringify(statusOf(s, shardId))})`,
    () => {
      const status = statusOf(s, shardId);
      return status?.state === state ? status : undefined;
    },
    { timeoutMs: timeoutMs ?? 20_000, intervalMs: 25 },
  );
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen({ host: '127.0.0.1', port: 0 }, () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

beforeAll(() => {
  logger = new CapturingLogger();
});

describe('the supervisor over real processes', () => {
  it('starts the sim engine, reports it ready, and the endpoint serves every name', async () => {
    const s = await supervisor();
    await s.desired([simLaunch('sim-a')]);
    const ready = await whenState(s, 'sim-a', 'ready');
    expect(ready.endpoint).toBe(`http://127.0.0.1:${ready.port}`);
    const models = (await (await fetch(`${ready.endpoint}/v1/models`)).json()) as { data: { id: string }[] };
    expect(models.data.map((m) => m.id)).toEqual(['tiny', 'tiny-chat']);
    const log = s.tailLog('sim-a', 10);
    expect(log[0], 'the supervisor marks each start in the log').toMatch(
      /^\[llmgw\] starting sim at .* engine sim --host 127\.0\.0\.1 --port \d+ --model tiny --model tiny-chat$/,
    );
    expect(
      log.some((line) => line.startsWith(`sim engine listening on http://127.0.0.1:${ready.port}`)),
      log.join('\n'),
    ).toBe(true);
  });

  it('restarts a crashed engine with backoff; the failure carries the exit code and the last lines', async () => {
    const seen: ShardStatus[] = [];
    const s = await supervisor({ onChange: (status) => seen.push(status) });
    await s.desired([simLaunch('sim-crash', ['--crash-after', '1'])]);
    const first = await whenState(s, 'sim-crash', 'ready');
    const reply = await fetch(`${first.endpoint}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tiny', prompt: 'hi', max_tokens: 2 }),
    });
    expect(reply.status).toBe(200);
    await reply.text();
    const again = await waitFor(
      'the restarted engine to be ready',
      () => {
        const status = statusOf(s, 'sim-crash');
        return status?.state === 'ready' && status.restarts === 1 ? status : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 25 },
    );
    expect(again.pid, 'a new process').not.toBe(first.pid);
    expect(again.port, 'on the same port').toBe(first.port);
    const failed = seen.find((x) => x.state === 'failed');
    expect(failed?.error?.code).toBe('LLMGW_ENGINE_EXITED');
    expect(failed?.error?.message).toMatch(
      /^engine exited with code 1 after [\d.]+m?s; last lines:\n(.|\n)*sim engine crashed on purpose after 1 requests/,
    );
    expect(failed?.lastExit?.code).toBe(1);
    expect(table.identity(first.pid!), 'the crashed process is gone').toBeNull();
  });

  it('stops the whole process group: a worker that ignores SIGTERM is killed too', async () => {
    const s = await supervisor({ stopGraceMs: 300 });
    await s.desired([
      simLaunch('forking', [], { profile: { name: 'p', engine: 'script', gpus: 0, shards: 1, args: [], env: {} } }),
    ]);
    const ready = await whenState(s, 'forking', 'ready');
    const worker = await waitFor(
      'the worker to print its pid',
      () => {
        const line = s.tailLog('forking', 20).find((l) => l.startsWith('worker '));
        return line ? Number(line.split(' ')[1]) : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 25 },
    );
    pids.add(worker);
    expect(table.identity(worker), 'the worker runs').not.toBeNull();
    await s.desired([]);
    await waitFor('the shard to be stopped', () => s.status().length === 0, { timeoutMs: 20_000, intervalMs: 25 });
    expect(table.identity(ready.pid!), 'the engine is gone').toBeNull();
    expect(table.identity(worker), 'the worker that ignored SIGTERM is gone').toBeNull();
    expect(
      s.tailLog('forking', 20).some((l) => l === 'worker ignores SIGTERM'),
      'the worker did get SIGTERM first',
    ).toBe(true);
    expect(logger.entries.some((e) => e.fields.shardId === 'forking' && /sending SIGKILL/.test(e.message))).toBe(true);
  });

  // Regression: the last probe before the deadline was cut to the time left (1 ms), so the error named
  // the probe's own timeout instead of the engine's 503, and the operator learned nothing.
  // The start timeout is what the stand-in (a Node process) has to start listening and answer 503: 1.5 s was too
  // little on a loaded CI machine (the last probe met ECONNREFUSED), so it is 6 s, well past any start seen there.
  it('reports an engine that is not ready within its start timeout as failed, and stops it', async () => {
    const s = await supervisor({ restartPolicy: { baseDelayMs: 3_600_000, jitterRatio: 0 } });
    await s.desired([simLaunch('slow', ['--startup-delay-ms', '600000'], { startTimeoutMs: 6_000 })]);
    const starting = await whenState(s, 'slow', 'starting');
    const failed = await whenState(s, 'slow', 'failed');
    expect(failed.error?.code).toBe('LLMGW_ENGINE_NOT_READY');
    expect(failed.error?.message).toMatch(
      /^engine did not become ready within 6s \(last probe: HTTP 503 from GET \/health\), so it was stopped; /,
    );
    expect(table.identity(starting.pid!), 'the slow engine was stopped').toBeNull();
  });

  it('a second supervisor over the same state adopts a running engine: same pid, not restarted', async () => {
    const first = await supervisor();
    const caseDir = dir;
    await first.desired([simLaunch('adopt-me')]);
    const ready = await whenState(first, 'adopt-me', 'ready');
    first.detach();
    live.splice(live.indexOf(first), 1);

    const second = await supervisor({}, caseDir);
    const report = second.adopt();
    expect(report.adopted.map((x) => [x.shardId, x.pid])).toEqual([['adopt-me', ready.pid]]);
    const adopted = await whenState(second, 'adopt-me', 'ready');
    await second.desired([simLaunch('adopt-me')]);
    expect(statusOf(second, 'adopt-me')).toMatchObject({
      pid: ready.pid,
      port: ready.port,
      adopted: true,
      restarts: 0,
    });
    expect(adopted.endpoint).toBe(ready.endpoint);
    expect((await fetch(`${adopted.endpoint}/health`)).status, 'it kept serving through the change of agent').toBe(200);
    await second.stop();
    expect(table.identity(ready.pid!), 'the adopted engine is stopped like our own').toBeNull();
  });

  it('refuses a record whose pid is alive but whose start token does not match, and leaves that process alone', async () => {
    const first = await supervisor();
    const caseDir = dir;
    await first.desired([simLaunch('reused')]);
    const ready = await whenState(first, 'reused', 'ready');
    first.detach();
    live.splice(live.indexOf(first), 1);
    const file = join(caseDir, 'state', 'shards', `${fileNameFor('reused')}.json`);
    const record = JSON.parse(readFileSync(file, 'utf8')) as ShardRecord;
    writeFileSync(file, JSON.stringify({ ...record, startToken: `${record.startToken.split(':')[0]}:1` }));

    const second = await supervisor({}, caseDir);
    const report = second.adopt();
    expect(report.adopted).toEqual([]);
    expect(report.discarded[0]?.reason).toMatch(new RegExp(`^pid ${ready.pid} is alive but started at another time`));
    expect(table.identity(ready.pid!), 'the process the record named was not touched').not.toBeNull();
    expect(second.status()).toEqual([]);
  });

  it("runs each engine's command line through its stand-in and becomes ready on what it listens to", async () => {
    const s = await supervisor();
    const [rpcPort, headPort] = [await freePort(), await freePort()];
    const peers = [
      { rank: 0, address: '127.0.0.1', port: headPort },
      { rank: 1, address: '127.0.0.1', port: rpcPort },
    ];
    const gpu = (engine: string, shardId: string, overrides: Partial<ShardLaunch>, shards = 1): ShardLaunch => ({
      ...simLaunch(shardId),
      profile: { name: 'gpu', engine, gpus: 1, shards, args: [], env: { VLLM_LOGGING_LEVEL: 'DEBUG' } },
      weightsPath: join(root, 'model.gguf'),
      gpuIndices: [0],
      ...overrides,
    });
    const launches = [
      gpu('vllm', 'vllm-single', {}),
      gpu('vllm', 'vllm-headless', { rank: 1, peers }, 2),
      gpu('llamacpp', 'llama-head', { rank: 0, peers }, 2),
      gpu('llamacpp', 'llama-rpc', { rank: 1, peers }, 2),
      gpu('sglang', 'sglang-worker', { rank: 1, peers }, 2),
    ];
    await s.desired(launches);
    const ready = await waitFor(
      () => `every stand-in ready (${JSON.stringify(s.status().map((x) => [x.shardId, x.state, x.error?.message]))})`,
      () => {
        const all = s.status();
        for (const x of all) if (x.pid) pids.add(x.pid);
        return all.length === launches.length && all.every((x) => x.state === 'ready') ? all : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 25 },
    );
    const byId = Object.fromEntries(ready.map((x) => [x.shardId, x]));
    expect(byId['llama-rpc']?.port, 'rpc-server listens on its peer port').toBe(rpcPort);
    expect(byId['llama-rpc']?.endpoint, 'ranks without the API have no endpoint').toBeUndefined();
    expect(byId['vllm-headless']?.endpoint).toBeUndefined();
    expect(byId['llama-head']?.endpoint).toBe(`http://127.0.0.1:${byId['llama-head']?.port}`);

    // What each stand-in recorded is the argv and environment the supervisor's records say it started. A rank with
    // nothing to listen on (vLLM's headless one) is ready once it runs, which can be before its stand-in has written
    // what it saw: a CI trial read the records first and missed that one, so they are waited for.
    const records = launches.map(
      (launch) =>
        JSON.parse(
          readFileSync(join(dir, 'state', 'shards', `${fileNameFor(launch.shardId)}.json`), 'utf8'),
        ) as ShardRecord,
    );
    const sameArgv = (r: { argv: readonly string[] }, record: ShardRecord) =>
      JSON.stringify(r.argv) === JSON.stringify(record.argv.slice(1));
    const recorded = await waitFor(
      'every stand-in to record what it was started with',
      () => {
        const all = standIns.records();
        return records.every((record) => all.some((r) => sameArgv(r, record))) ? all : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 25 },
    ).catch(() => standIns.records());
    for (const [i, launch] of launches.entries()) {
      const record = records[i]!;
      const seen = recorded.find((r) => sameArgv(r, record));
      expect(seen, `${launch.shardId}: no stand-in recorded ${record.argv.join(' ')}`).toBeDefined();
      expect(seen?.program).toBe(record.argv[0] === 'python3' ? 'python3' : record.argv[0]);
      expect(seen?.env.CUDA_VISIBLE_DEVICES, `${launch.shardId} sees only its GPU`).toBe('0');
      expect(seen?.env.VLLM_LOGGING_LEVEL, "the profile's env reaches the engine").toBe('DEBUG');
    }
  });

  it('starts every engine with the replica secret where each reads it, never on its command line, and each refuses a request without it', async () => {
    // vLLM and llama-server take the secret from VLLM_API_KEY and LLAMA_API_KEY, sim and builtin from
    // LLMGW_ENGINE_API_KEY, SGLang from a 0600 --config file: a command line is world-readable (ps), and
    // sim, builtin and SGLang got it as --api-key=SECRET (issue 33). A stand-in that read only --api-key
    // would serve everyone, and a real engine would too.
    const s = await supervisor();
    const secret = 'llmgw-es-process-test-secret';
    const keyed = (engine: string, shardId: string): ShardLaunch => ({
      ...simLaunch(shardId),
      profile: { name: 'gpu', engine, gpus: engine === 'sim' ? 0 : 1, shards: 1, args: [], env: {} },
      weightsPath: join(root, 'model.gguf'),
      gpuIndices: engine === 'sim' ? [] : [0],
      apiKey: secret,
    });
    const launches = [
      keyed('vllm', 'vllm-keyed'),
      keyed('llamacpp', 'llama-keyed'),
      keyed('sglang', 'sglang-keyed'),
      keyed('sim', 'sim-keyed'),
    ];
    await s.desired(launches);
    const ready = await waitFor(
      () =>
        `every keyed stand-in ready (${JSON.stringify(s.status().map((x) => [x.shardId, x.state, x.error?.message]))})`,
      () => {
        const all = s.status();
        for (const x of all) if (x.pid) pids.add(x.pid);
        return all.length === launches.length && all.every((x) => x.state === 'ready') ? all : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 25 },
    );
    for (const x of ready) {
      const bare = await fetch(`${x.endpoint!}/v1/models`);
      expect(bare.status, `${x.shardId}: no key, refused`).toBe(401);
      const keyedAnswer = await fetch(`${x.endpoint!}/v1/models`, { headers: { authorization: `Bearer ${secret}` } });
      expect(keyedAnswer.status, `${x.shardId}: the replica secret is served`).toBe(200);
      const record = JSON.parse(
        readFileSync(join(dir, 'state', 'shards', `${fileNameFor(x.shardId)}.json`), 'utf8'),
      ) as ShardRecord;
      expect(record.argv.join(' '), `${x.shardId}: the secret is not on the command line`).not.toContain(secret);
      expect(
        readFileSync(`/proc/${x.pid!}/cmdline`, 'utf8'),
        `${x.shardId}: nor on the running process's`,
      ).not.toContain(secret);
    }
    const keyFile = join(dir, 'state', 'engine-secrets', 'sglang-keyed.sglang.yaml');
    expect(statSync(keyFile).mode & 0o777, "SGLang's key file is its owner's alone").toBe(0o600);
    await s.desired([]);
    await waitFor('every keyed shard stopped', () => s.status().length === 0, { timeoutMs: 20_000, intervalMs: 25 });
    expect(existsSync(keyFile), "SGLang's key file is removed once its shard stops").toBe(false);
  });
});
