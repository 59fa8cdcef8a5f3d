// The supervisor's state machine on a hand-moved clock with processes that
// are objects: starts, readiness with backoff, start timeouts, crashes and
// restarts, stops that escalate to SIGKILL, convergence on the wanted set,
// and adoption. Real processes are in process.test.ts.
import { mkdtempSync, readFileSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { IllegalStateError, LlmgwError } from '../../errors/index.js';
import { adapterFor, type ShardLaunch } from '../engines/index.js';
import { Supervisor, type SupervisorOptions } from './index.js';
import { CapturingLogger, FakeProcesses, ManualClock, ScriptedProber } from '../../../test/support/supervisor-fakes.js';

let dir: string;
let clock: ManualClock;
let processes: FakeProcesses;
let prober: ScriptedProber;
let logger: CapturingLogger;
let taken: Set<number>;
const supervisors: Supervisor[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'llmgw-supervisor-'));
  clock = new ManualClock();
  processes = new FakeProcesses();
  prober = new ScriptedProber(clock);
  logger = new CapturingLogger();
  taken = new Set();
});

afterEach(() => {
  for (const s of supervisors.splice(0)) {
    try {
      s.detach();
    } catch {
      // Already stopped or detached by the test.
    }
  }
  rmSync(dir, { recursive: true, force: true });
});

async function supervisor(overrides: Partial<SupervisorOptions> = {}): Promise<Supervisor> {
  const s = await Supervisor.create({
    logsDir: join(dir, 'logs'),
    stateDir: join(dir, 'state'),
    logger,
    clock,
    spawner: processes,
    processTable: processes,
    prober,
    adapterFor: (engine) => adapterFor(engine, { llmgwBin: '/opt/llmgw/bin/llmgw.js', nodePath: '/usr/bin/node' }),
    isPortFree: (_host, port) => Promise.resolve(!taken.has(port)),
    firstPort: 20000,
    lastPort: 20009,
    stopGraceMs: 10_000,
    restartPolicy: { baseDelayMs: 1000, factor: 2, maxDelayMs: 60_000, jitterRatio: 0.2, random: () => 0.5 },
    baseEnv: { PATH: '/usr/bin' },
    ...overrides,
  });
  supervisors.push(s);
  return s;
}

function launch(
  shardId: string,
  overrides: Partial<ShardLaunch> = {},
  profile: Partial<ShardLaunch['profile']> = {},
): ShardLaunch {
  return {
    replicaId: `rep-${shardId}`,
    shardId,
    model: { name: 'tiny', aliases: ['tiny-chat'] },
    profile: { name: 'cpu', engine: 'sim', gpus: 0, shards: 1, args: [], env: {}, ...profile },
    weightsPath: '/weights/tiny',
    gpuIndices: [],
    host: '127.0.0.1',
    port: 0,
    rank: 0,
    peers: [],
    ...overrides,
  };
}

function shard(s: Supervisor, id: string) {
  const status = s.status().find((x) => x.shardId === id);
  if (!status)
    throw new Error(
      `no shard ${id}; have ${
        s
          .status()
          .map((x) => x.shardId)
          .join(', ') || 'none'
      }`,
    );
  return status;
}

function state(s: Supervisor, id: string): string {
  return s.status().find((x) => x.shardId === id)?.state ?? 'absent';
}

describe('starting', () => {
  it('starts a wanted shard on a port from the range and reports it ready once its probe answers', async () => {
    const s = await supervisor();
    prober.answer = () => ({ ok: false, detail: 'ECONNREFUSED' });
    await s.desired([launch('a')]);
    const starting = shard(s, 'a');
    expect(starting.state).toBe('starting');
    expect(starting.port).toBe(20000);
    const process = processes.byPid(starting.pid)!;
    expect(process.argv).toEqual([
      '/usr/bin/node',
      '/opt/llmgw/bin/llmgw.js',
      'engine',
      'sim',
      '--host',
      '127.0.0.1',
      '--port',
      '20000',
      '--model',
      'tiny',
      '--model',
      'tiny-chat',
    ]);
    expect(
      process.env,
      "the agent's environment with the plan's merged over it, and the marks that find the engine again",
    ).toEqual({
      PATH: '/usr/bin',
      CUDA_VISIBLE_DEVICES: '',
      LLMGW_AGENT_STATE_DIR: s.options.stateDir,
      LLMGW_SHARD_ID: 'a',
      LLMGW_SHARD_PORT: '20000',
    });

    prober.answer = () => ({ ok: true });
    await clock.until(() => state(s, 'a') === 'ready', 'shard a ready');
    const ready = shard(s, 'a');
    expect(ready).toMatchObject({ endpoint: 'http://127.0.0.1:20000', restarts: 0, adopted: false, pid: process.pid });
    expect(ready.readyAt, 'readyAt is set once ready').toBeDefined();
    expect(logger.transitions('a')).toEqual(['→starting', 'starting→ready']);
  });

  it('polls readiness with a growing wait, capped, until the engine answers', async () => {
    const s = await supervisor({ readinessPollInitialMs: 100, readinessPollMaxMs: 300 });
    let probes = 0;
    prober.answer = () => (++probes < 6 ? { ok: false, detail: 'HTTP 503 from GET /health' } : { ok: true });
    await s.desired([launch('a')]);
    await clock.until(() => state(s, 'a') === 'ready', 'shard a ready');
    const gaps = prober.probesAtMs.slice(1).map((at, i) => at - prober.probesAtMs[i]!);
    expect(gaps, 'waits of 100, ×1.5 each, at most 300').toEqual([100, 150, 225, 300, 300]);
  });

  it('stops an engine that is not ready within its start timeout and reports LLMGW_ENGINE_NOT_READY with the last probe', async () => {
    const s = await supervisor({
      startTimeoutMs: { sim: 30_000 },
      restartPolicy: { baseDelayMs: 3_600_000, jitterRatio: 0 },
    });
    prober.answer = () => ({ ok: false, detail: 'HTTP 503 from GET /health' });
    processes.behaviour = () => ({ output: ['loading weights…', 'still loading'] });
    await s.desired([launch('a')]);
    const pid = shard(s, 'a').pid!;
    await clock.until(() => state(s, 'a') === 'failed', 'shard a failed');
    const failed = shard(s, 'a');
    expect(failed.error?.code).toBe('LLMGW_ENGINE_NOT_READY');
    expect(failed.error?.message).toMatch(/did not become ready within 30s \(last probe: HTTP 503 from GET \/health\)/);
    expect(failed.error?.message, "the engine's last lines are quoted").toMatch(
      /last lines:\n {2}loading weights…\n {2}still loading/,
    );
    expect(processes.byPid(pid)!.signals, 'the engine was told to stop').toEqual(['SIGTERM']);
    expect(processes.byPid(pid)!.alive).toBe(false);
    expect(failed.nextRestartAt, 'a restart is still due (the policy does not give up)').toBeDefined();
    expect(logger.transitions('a')).toEqual(['→starting', 'starting→stopping', 'stopping→failed']);
  });

  it('lets a launch override the engine start timeout', async () => {
    const s = await supervisor();
    prober.answer = () => ({ ok: false, detail: 'ECONNREFUSED' });
    await s.desired([launch('a', { startTimeoutMs: 2_000 })]);
    const startMs = clock.now();
    await clock.until(() => state(s, 'a') === 'failed', 'shard a failed');
    expect(clock.now() - startMs, 'failed at its own 2 s timeout, not the 60 s default').toBeLessThan(3_000);
    expect(shard(s, 'a').error?.message).toMatch(/within 2s/);
  });
});

describe('crashes', () => {
  it('restarts a crashed engine with exponential backoff, keeping its port, and carries the exit code and last lines', async () => {
    const s = await supervisor();
    processes.behaviour = () => ({ output: ['loaded', 'CUDA out of memory'] });
    await s.desired([launch('a')]);
    await clock.until(() => state(s, 'a') === 'ready', 'ready');
    const delays: number[] = [];
    for (let crash = 1; crash <= 3; crash++) {
      const before = shard(s, 'a');
      clock.now();
      await clock.advance(3_000);
      processes.byPid(before.pid)!.exit(1);
      await clock.until(() => state(s, 'a') === 'failed', `failure ${crash}`);
      const failed = shard(s, 'a');
      expect(failed.error?.code).toBe('LLMGW_ENGINE_EXITED');
      expect(failed.error?.message).toMatch(
        /^engine exited with code 1 after 3s; last lines:\n {2}loaded\n {2}CUDA out of memory$/,
      );
      expect(failed.lastExit).toEqual({ code: 1, signal: null, afterMs: 3_000 });
      delays.push(Date.parse(failed.nextRestartAt!) - clock.now());
      await clock.until(() => state(s, 'a') === 'ready', `ready after restart ${crash}`);
      const again = shard(s, 'a');
      expect(again.restarts).toBe(crash);
      expect(again.pid, 'a new process').not.toBe(before.pid);
      expect(again.port, 'the endpoint stays put').toBe(20000);
      expect(again.error, 'a ready engine has no error').toBeUndefined();
    }
    expect(delays, 'base 1 s, doubling (jitter is centred by the seeded random)').toEqual([1_000, 2_000, 4_000]);
  });

  it('starts the backoff over after a stable run, and never restarts faster than the jitter allows', async () => {
    let draw = 0;
    const draws = [0, 0.999_999];
    const s = await supervisor({
      restartPolicy: {
        baseDelayMs: 1000,
        factor: 2,
        jitterRatio: 0.5,
        stableAfterMs: 60_000,
        random: () => draws[draw++ % 2]!,
      },
    });
    await s.desired([launch('a')]);
    await clock.until(() => state(s, 'a') === 'ready', 'ready');
    processes.byPid(shard(s, 'a').pid)!.exit(1);
    await clock.until(() => state(s, 'a') === 'failed', 'first failure');
    expect(Date.parse(shard(s, 'a').nextRestartAt!) - clock.now(), 'lowest jitter: half of 1 s').toBe(500);
    await clock.until(() => state(s, 'a') === 'ready', 'ready again');
    await clock.advance(61_000);
    processes.byPid(shard(s, 'a').pid)!.exit(1);
    await clock.until(() => state(s, 'a') === 'failed', 'failure after a stable run');
    expect(
      Date.parse(shard(s, 'a').nextRestartAt!) - clock.now(),
      'back to the base delay (highest jitter), not 2 s ×1.5',
    ).toBe(1_500);
    expect(logger.entries.some((e) => /long enough to start the backoff over/.test(e.message))).toBe(true);
  });

  it('kills workers the crashed engine left behind before starting it again', async () => {
    const s = await supervisor();
    processes.behaviour = () => ({ workers: 2 });
    await s.desired([launch('a')]);
    await clock.until(() => state(s, 'a') === 'ready', 'ready');
    const first = processes.byPid(shard(s, 'a').pid)!;
    first.exit(null, 'SIGSEGV');
    await clock.until(() => state(s, 'a') === 'failed', 'failed');
    expect(shard(s, 'a').error?.message).toMatch(/^engine was killed by SIGSEGV after/);
    await clock.until(() => shard(s, 'a').restarts === 1, 'restarted');
    expect(first.signals, 'the orphaned workers got SIGTERM').toEqual(['SIGTERM']);
    expect(first.workersAlive).toBe(0);
  });

  it('reports a crash before readiness as a failed start', async () => {
    const s = await supervisor();
    prober.answer = () => ({ ok: false, detail: 'ECONNREFUSED' });
    processes.behaviour = () => ({ output: ['error: unrecognized arguments: --nnodes'] });
    await s.desired([launch('a')]);
    processes.byPid(shard(s, 'a').pid)!.exit(2);
    await clock.until(() => state(s, 'a') === 'failed', 'failed');
    expect(shard(s, 'a').error).toEqual({
      code: 'LLMGW_ENGINE_START_FAILED',
      message:
        'engine exited with code 2 after 0ms, before it was ready; last lines:\n  error: unrecognized arguments: --nnodes',
    });
  });

  // vLLM and SGLang echo their arguments at start, --api-key included; a failure quoting them sent the engine's key to every admin.
  it("cuts the engine's key out of the last lines it quotes and out of the log it serves", async () => {
    const s = await supervisor();
    prober.answer = () => ({ ok: false, detail: 'ECONNREFUSED' });
    processes.behaviour = () => ({
      output: ["non-default args: {'api_key': ['replica-secret']}", 'error: CUDA out of memory'],
    });
    await s.desired([launch('a', { apiKey: 'replica-secret' })]);
    processes.byPid(shard(s, 'a').pid)!.exit(1);
    await clock.until(() => state(s, 'a') === 'failed', 'failed');
    expect(shard(s, 'a').error?.message).toContain("non-default args: {'api_key': ['<redacted>']}");
    expect(shard(s, 'a').error?.message).not.toContain('replica-secret');
    expect(s.tailLog('a', 50).join('\n'), 'ctl logs').not.toContain('replica-secret');
    expect(JSON.stringify(logger.entries), "the agent's own log").not.toContain('replica-secret');
  });

  it('gives up after the policy says so and stays failed', async () => {
    const s = await supervisor({ restartPolicy: { maxConsecutiveFailures: 2, baseDelayMs: 10, jitterRatio: 0 } });
    await s.desired([launch('a')]);
    for (let i = 0; i < 3; i++) {
      await clock.until(() => state(s, 'a') === 'ready', `ready ${i}`);
      processes.byPid(shard(s, 'a').pid)!.exit(1);
      await clock.until(() => state(s, 'a') === 'failed', `failed ${i}`);
    }
    await clock.advance(3_600_000);
    const final = shard(s, 'a');
    expect(final.state).toBe('failed');
    expect(final.restarts).toBe(2);
    expect(final.nextRestartAt).toBeUndefined();
    expect(logger.entries.at(-1)?.message).toMatch(/policy gives up after 2/);
  });

  it('retries an engine that cannot be spawned, and does not retry a launch that cannot be planned', async () => {
    const s = await supervisor();
    processes.behaviour = (req) =>
      req.argv.includes('missing')
        ? {
            failSpawn: new LlmgwError(
              'LLMGW_ENGINE_START_FAILED',
              "cannot start the engine: vllm was not found on the engine's PATH",
            ),
          }
        : {};
    await s.desired([
      launch('spawn-fails', {}, { args: ['missing'] }),
      launch('unknown', {}, { engine: 'tensorrt' }),
      launch('bad-peers', { rank: 1 }),
    ]);
    await clock.until(
      () => ['spawn-fails', 'unknown', 'bad-peers'].every((id) => state(s, id) === 'failed'),
      'three failures',
    );
    expect(shard(s, 'spawn-fails').error?.message).toMatch(/not found on the engine's PATH/);
    expect(shard(s, 'spawn-fails').nextRestartAt, 'a missing program may yet be installed').toBeDefined();
    expect(shard(s, 'unknown').error?.code).toBe('LLMGW_ENGINE_UNKNOWN');
    expect(shard(s, 'unknown').nextRestartAt).toBeUndefined();
    expect(shard(s, 'bad-peers').error?.message).toMatch(/rank 0 only/);
    expect(shard(s, 'bad-peers').nextRestartAt).toBeUndefined();
  });
});

describe('stopping', () => {
  it('sends SIGTERM to the group, SIGKILL after the grace period, then forgets the shard and frees its port', async () => {
    const s = await supervisor({ stopGraceMs: 5_000 });
    processes.behaviour = () => ({ ignoreTerm: true, workers: 1 });
    await s.desired([launch('a')]);
    await clock.until(() => state(s, 'a') === 'ready', 'ready');
    const process = processes.byPid(shard(s, 'a').pid)!;
    const startMs = clock.now();
    const done = s.desired([]);
    await done;
    expect(state(s, 'a')).toBe('stopping');
    await clock.until(() => state(s, 'a') === 'absent', 'shard a gone');
    expect(process.signals).toEqual(['SIGTERM', 'SIGKILL']);
    expect(clock.now() - startMs, 'SIGKILL came after the 5 s grace').toBeGreaterThanOrEqual(5_000);
    expect(process.alive || process.workersAlive > 0).toBe(false);
    expect(logger.transitions('a').slice(-2)).toEqual(['ready→stopping', 'stopping→stopped']);
    expect(readdirSync(join(dir, 'state', 'shards')), 'no record is left').toEqual([]);
    await s.desired([launch('b')]);
    await s.desired([launch('b'), launch('c')]);
    expect(shard(s, 'b').port, 'round robin: the next port, not the one just freed').toBe(20001);
  });

  it('stops a shard waiting to restart without starting it again', async () => {
    const s = await supervisor();
    await s.desired([launch('a')]);
    await clock.until(() => state(s, 'a') === 'ready', 'ready');
    processes.byPid(shard(s, 'a').pid)!.exit(1);
    await clock.until(() => state(s, 'a') === 'failed', 'failed');
    await s.desired([]);
    await clock.until(() => state(s, 'a') === 'absent', 'gone');
    await clock.advance(600_000);
    expect(processes.spawned, 'no restart after the stop').toHaveLength(1);
  });

  it('stop() ends every engine and refuses further work; detach() leaves engines and records alone', async () => {
    const s = await supervisor();
    await s.desired([launch('a'), launch('b')]);
    await clock.until(() => s.status().every((x) => x.state === 'ready'), 'both ready');
    const stopping = s.stop();
    await clock.until(() => s.status().length === 0, 'all stopped');
    await stopping;
    expect(processes.spawned.every((p) => !p.alive)).toBe(true);
    expect(() => s.desired([launch('a')])).toThrow(IllegalStateError);

    const t = await supervisor();
    await t.desired([launch('c')]);
    await clock.until(() => state(t, 'c') === 'ready', 'c ready');
    t.detach();
    const c = processes.spawned.at(-1)!;
    await clock.advance(600_000);
    expect(c.alive && c.signals.length === 0, 'detach does not signal').toBe(true);
    expect(readdirSync(join(dir, 'state', 'shards'))).toEqual(['c.json']);
    expect(() => t.detach()).toThrow(IllegalStateError);
  });
});

describe('convergence', () => {
  it('leaves a matching shard alone, replaces one whose launch changed, and stops one no longer wanted', async () => {
    const s = await supervisor();
    await s.desired([launch('same'), launch('changed'), launch('gone')]);
    await clock.until(() => s.status().every((x) => x.state === 'ready'), 'all ready');
    const pids = Object.fromEntries(s.status().map((x) => [x.shardId, x.pid]));

    await s.desired([launch('same'), launch('changed', {}, { args: ['--ttft-ms', '5'] })]);
    await clock.until(
      () =>
        state(s, 'gone') === 'absent' && state(s, 'changed') === 'ready' && shard(s, 'changed').pid !== pids.changed,
      'converged',
    );
    expect(shard(s, 'same').pid, 'same launch, same process').toBe(pids.same);
    expect(processes.byPid(shard(s, 'changed').pid)!.argv.slice(-2)).toEqual(['--ttft-ms', '5']);
    expect(processes.byPid(pids.changed)!.alive).toBe(false);
    expect(processes.byPid(pids.gone)!.alive).toBe(false);
    expect(logger.entries.some((e) => /its launch changed/.test(e.message))).toBe(true);
  });

  it('refuses a wanted set that names a shard twice', async () => {
    const s = await supervisor();
    expect(() => s.desired([launch('a'), launch('a')])).toThrow(/listed twice/);
  });

  it('fails a shard with LLMGW_PORT_EXHAUSTED when the range is used up, skipping ports other processes hold', async () => {
    taken.add(20001);
    const s = await supervisor({ firstPort: 20000, lastPort: 20002 });
    await s.desired([launch('a'), launch('b'), launch('c')]);
    await clock.until(() => state(s, 'c') === 'failed', 'c failed');
    expect(shard(s, 'a').port).toBe(20000);
    expect(shard(s, 'b').port, '20001 is taken by someone else').toBe(20002);
    expect(shard(s, 'c').error?.code).toBe('LLMGW_PORT_EXHAUSTED');
    expect(shard(s, 'c').error?.message).toMatch(/2 held by engines of this agent, 1 taken by other processes/);
  });

  it('moves a restarting engine to another port when its own was taken while it was down', async () => {
    const s = await supervisor();
    await s.desired([launch('a')]);
    await clock.until(() => state(s, 'a') === 'ready', 'ready');
    processes.byPid(shard(s, 'a').pid)!.exit(1);
    await clock.until(() => state(s, 'a') === 'failed', 'failed');
    taken.add(20000);
    await clock.until(() => state(s, 'a') === 'ready', 'ready again');
    expect(shard(s, 'a').port).toBe(20001);
    expect(processes.spawned.at(-1)!.argv).toContain('20001');
  });

  it('tells the agent about every change', async () => {
    const seen: string[] = [];
    const s = await supervisor({ onChange: (status) => seen.push(`${status.shardId}:${status.state}`) });
    await s.desired([launch('a')]);
    await clock.until(() => state(s, 'a') === 'ready', 'ready');
    expect(seen[0]).toBe('a:starting');
    expect(seen.at(-1)).toBe('a:ready');
  });
});

describe('adoption', () => {
  it('adopts an engine an earlier agent left running: same pid, probed again, not restarted', async () => {
    const first = await supervisor();
    await first.desired([launch('a', {}, { env: { HF_TOKEN: 'hf_secret' } })]);
    await clock.until(() => state(first, 'a') === 'ready', 'ready under the first agent');
    const pid = shard(first, 'a').pid;
    first.detach();
    const record = readFileSync(join(dir, 'state', 'shards', 'a.json'), 'utf8');
    expect(record, 'a record holds the launch').toMatch(/"shardId": "a"/);

    const second = await supervisor();
    const report = second.adopt();
    expect(report.adopted.map((x) => [x.shardId, x.pid, x.adopted])).toEqual([['a', pid, true]]);
    expect(report.discarded).toEqual([]);
    await clock.until(() => state(second, 'a') === 'ready', 'ready under the second agent');
    await second.desired([launch('a', {}, { env: { HF_TOKEN: 'hf_secret' } })]);
    await clock.advance(10_000);
    expect(shard(second, 'a')).toMatchObject({ pid, state: 'ready', port: 20000, adopted: true });
    expect(processes.spawned, 'nothing was started again').toHaveLength(1);
    expect(() => second.adopt(), 'adopt runs once').toThrow(IllegalStateError);
  });

  it('refuses a record whose pid is alive with another start token, never signals it, and starts the shard anew', async () => {
    const first = await supervisor();
    await first.desired([launch('a')]);
    await clock.until(() => state(first, 'a') === 'ready', 'ready');
    const pid = shard(first, 'a').pid!;
    first.detach();
    const file = join(dir, 'state', 'shards', 'a.json');
    writeFileSync(file, readFileSync(file, 'utf8').replace(`fake-start-${pid}`, 'fake-start-1'));

    const second = await supervisor();
    const report = second.adopt();
    expect(report.adopted).toEqual([]);
    expect(report.discarded).toEqual([
      { shardId: 'a', pid, reason: expect.stringMatching(/alive but started at another time/) as unknown as string },
    ]);
    expect(readdirSync(join(dir, 'state', 'shards')), 'the stale record is removed').toEqual([]);
    await second.desired([launch('a')]);
    expect(processes.byPid(pid)!.signals, 'the stranger was not signalled').toEqual([]);
    expect(shard(second, 'a').pid).not.toBe(pid);
  });

  it('removes records of engines that are gone or unreadable, and stops an adopted engine no longer wanted', async () => {
    const first = await supervisor();
    await first.desired([launch('gone'), launch('unwanted')]);
    await clock.until(() => first.status().every((x) => x.state === 'ready'), 'ready');
    const gonePid = shard(first, 'gone').pid!;
    first.detach();
    processes.byPid(gonePid)!.exit(0);
    writeFileSync(join(dir, 'state', 'shards', 'junk.json'), '{not json');

    const second = await supervisor();
    const report = second.adopt();
    expect(report.adopted.map((x) => x.shardId)).toEqual(['unwanted']);
    expect(report.discarded.map((d) => d.reason)).toEqual([
      `pid ${gonePid} is no longer running`,
      expect.stringMatching(/junk\.json: unreadable/) as unknown as string,
    ]);
    const unwanted = processes.byPid(shard(second, 'unwanted').pid)!;
    await second.desired([]);
    await clock.until(() => second.status().length === 0, 'stopped');
    expect(unwanted.signals).toEqual(['SIGTERM']);
  });

  it('keeps an adopted engine whose shard is wanted but pending (weights being checked) instead of stopping it', async () => {
    // Guards the agent restart that stopped every engine it had just adopted: its first wanted set
    // lists no launch until the weights are checked again, and "not listed" read as "not wanted".
    const first = await supervisor();
    await first.desired([launch('a')]);
    await clock.until(() => state(first, 'a') === 'ready', 'ready');
    const pid = shard(first, 'a').pid!;
    first.detach();
    const second = await supervisor();
    second.adopt();
    await second.desired([], { pending: ['a'] });
    await clock.advance(20_000);
    expect(shard(second, 'a'), 'still the adopted engine').toMatchObject({ state: 'ready', pid, restarts: 0 });
    expect(processes.byPid(pid)!.signals, 'never signalled').toEqual([]);
    await second.desired([launch('a')]);
    expect(shard(second, 'a').pid, 'the launch, once known, matches: kept').toBe(pid);
  });

  it('stops and restarts a ready engine whose liveness probe fails in a row', async () => {
    const s = await supervisor({ livenessIntervalMs: 1_000, livenessFailures: 3 });
    await s.desired([launch('a')]);
    await clock.until(() => state(s, 'a') === 'ready', 'ready');
    const pid = shard(s, 'a').pid!;
    prober.answer = () => ({ ok: false, detail: 'timed out after 2s' });
    await clock.until(() => state(s, 'a') === 'failed', 'failed after the liveness probes');
    expect(shard(s, 'a').error).toMatchObject({
      code: 'LLMGW_ENGINE_UNRESPONSIVE',
      message: expect.stringContaining('3 probes in a row failed') as unknown as string,
    });
    expect(processes.byPid(pid)!.signals[0], 'the hung engine was stopped').toBe('SIGTERM');
    prober.answer = () => ({ ok: true });
    await clock.until(() => state(s, 'a') === 'ready' && shard(s, 'a').restarts === 1, 'restarted');
    expect(shard(s, 'a').pid).not.toBe(pid);
  });

  // Regression: a two-node llama.cpp replica would lose its rank 1 some
  // liveness intervals after it was ready. rpc-server serves one client at a
  // time (the head) and listens with a backlog of 1 (ggml-rpc's
  // transport.cpp); the liveness probe's TCP connects fill that queue, the
  // next one times out, and the agent kills the "hung" rpc-server, and with
  // it the replica.
  it('does not probe a ready rpc-server rank again: only its exit says it died', async () => {
    const s = await supervisor({ livenessIntervalMs: 1_000, livenessFailures: 1 });
    const peers = [
      { rank: 0, address: '127.0.0.1' },
      { rank: 1, address: '127.0.0.1', port: 50052 },
    ];
    await s.desired([launch('rpc', { rank: 1, peers }, { engine: 'llamacpp', shards: 2 })]);
    await clock.until(() => state(s, 'rpc') === 'ready', 'ready');
    const pid = shard(s, 'rpc').pid!;
    const probes = prober.probesAtMs.length;
    prober.answer = () => ({ ok: false, detail: 'timed out after 2s' });
    await clock.advance(30_000);
    expect(prober.probesAtMs.length, 'no probe once ready').toBe(probes);
    expect(shard(s, 'rpc'), 'still the same ready process').toMatchObject({ state: 'ready', pid, restarts: 0 });
    processes.byPid(pid)!.exit(1);
    await clock.until(() => state(s, 'rpc') === 'failed', 'its exit is noticed');
  });

  it('notices that an adopted engine died, without an exit event, and restarts it', async () => {
    const first = await supervisor();
    await first.desired([launch('a')]);
    await clock.until(() => state(first, 'a') === 'ready', 'ready');
    first.detach();
    const second = await supervisor({ adoptedPollIntervalMs: 500 });
    second.adopt();
    await clock.until(() => state(second, 'a') === 'ready', 'adopted and ready');
    processes.byPid(shard(second, 'a').pid)!.exit(137);
    await clock.until(() => state(second, 'a') === 'failed', 'failed');
    expect(shard(second, 'a').error?.message).toMatch(
      /started by an earlier agent\) is gone after .*; its exit code is unknown/,
    );
    await clock.until(() => state(second, 'a') === 'ready' && shard(second, 'a').restarts === 1, 'restarted');
  });
});

describe('logs', () => {
  it("keeps a stopped shard's log for tailLog, and removes logs of shards gone longer than the retention", async () => {
    const s = await supervisor({ logCheckIntervalMs: 1_000, stoppedLogRetentionMs: 7 * 86_400_000 });
    processes.behaviour = () => ({ output: ['hello from the engine'] });
    await s.desired([launch('kept'), launch('stopped')]);
    await clock.until(() => s.status().every((x) => x.state === 'ready'), 'ready');
    await s.desired([launch('kept')]);
    await clock.until(() => state(s, 'stopped') === 'absent', 'stopped');
    expect(s.tailLog('stopped', 5).slice(1, 2), 'the log outlives the shard').toEqual(['hello from the engine']);
    expect(() => s.tailLog('never-ran', 5)).toThrow(/has no log on this node/);

    const logs = join(dir, 'logs');
    const day = 86_400_000;
    writeFileSync(join(logs, 'old.log'), 'x\n');
    writeFileSync(join(logs, 'old.log.1'), 'x\n');
    for (const [name, ageMs] of [
      ['old.log', 8 * day],
      ['old.log.1', 9 * day],
      ['stopped.log', 1 * day],
      ['kept.log', 30 * day],
    ] as const) {
      utimesSync(join(logs, name), new Date(clock.now() - ageMs), new Date(clock.now() - ageMs));
    }
    await clock.advance(1_000);
    await clock.until(() => !readdirSync(logs).includes('old.log.1'), 'old logs removed');
    expect(readdirSync(logs).sort(), "a recent log and a running shard's log stay").toEqual([
      'kept.log',
      'stopped.log',
    ]);
  });
});

describe('options', () => {
  it('rejects an unknown option naming the nearest one, and a bad number saying what it wants', async () => {
    await expect(supervisor({ stopGraceMS: 5 } as Partial<SupervisorOptions>)).rejects.toThrow(
      /"stopGraceMS" is unknown; did you mean "stopGraceMs"/,
    );
    await expect(supervisor({ stopGraceMs: -1 })).rejects.toThrow(
      /stopGraceMs must be a number of milliseconds, 0 or more/,
    );
  });
});
