// Attacks on the engines, replayed against real processes on loopback: a
// control plane, an agent started the way an operator starts one (join
// token and HF token in its environment), and the sim engines it runs.
// Each test opens with the attack it replays and checks both the refusal
// and that nothing changed because of it.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ReplicaView } from '../../src/api/index.js';
import { killEnginesOf, startControl, startLlmgw, stopAll, type RunningProcess } from '../support/processes.js';
import { waitFor } from '../support/wait.js';
import { engineRecordOf } from '../support/fleet.js';

const JOIN = 'sec-join-token-engines-0123456789';
const ADMIN = 'sec-admin-token-engines-012345678';
const HF_CANARY = 'hf_canary_engines_0123456789abcdef';
const SECRET_CANARY = 'secret-canary-engines-0123456789';
const admin = { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json', 'x-llmgw-actor': 'sec-engines' };

const stateDirs: string[] = [];

afterAll(async () => {
  await stopAll();
  killEnginesOf(stateDirs);
});

interface Plane {
  control: RunningProcess & { urls: { client: string; admin: string; agent: string } };
  /** The agent now running (replaced by restartAgent). */
  agent: RunningProcess;
  stateDir: string;
  source: string;
  /** Kills the agent (SIGKILL: engines keep running) and starts it again on the same state directory. */
  restartAgent(): Promise<RunningProcess>;
  api<T>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }>;
}

/** A control plane and one agent whose environment holds the secrets an operator's agent holds. */
async function startPlane(
  name: string,
  firstPort: number,
  controlArgs: string[] = [],
  agentArgs: string[] = [],
): Promise<Plane> {
  const dir = mkdtempSync(join(tmpdir(), `llmgw-sec-engines-${name}-`));
  const control = await startControl([
    '--store',
    `sqlite:${join(dir, 'db')}`,
    '--join-token',
    JOIN,
    '--admin-token',
    ADMIN,
    '--reconcile-interval',
    '300ms',
    '--log-level',
    'debug',
    ...controlArgs,
  ]);
  const stateDir = join(dir, 'agent');
  stateDirs.push(stateDir);
  // The join token comes from the environment, as a service manager would set it; no --join-token flag.
  const startAgent = () =>
    startLlmgw(
      [
        'agent',
        '--control',
        control.urls.agent,
        '--node-id',
        `${name}-n1`,
        '--state-dir',
        stateDir,
        '--simulate',
        'gpus=0,ram=16g',
        '--heartbeat-interval',
        '300ms',
        '--port-range',
        `${firstPort}-${firstPort + 49}`,
        '--log-level',
        'debug',
        ...agentArgs,
      ],
      { env: { LLMGW_JOIN_TOKEN: JOIN, HF_TOKEN: HF_CANARY, SECRET_CANARY } },
    );
  const agent = startAgent();
  const api = async <T>(method: string, path: string, body?: unknown) => {
    const res = await fetch(`${control.urls.admin}${path}`, {
      method,
      headers: admin,
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: (await res.json()) as T };
  };
  await waitFor('the node up', async () => {
    const { body } = await api<{ liveness: string }[]>('GET', '/api/v1/nodes');
    return body.length === 1 && body[0]!.liveness === 'up' ? true : undefined;
  });
  const weights = join(dir, 'weights');
  mkdirSync(weights);
  const plane: Plane = {
    control,
    agent,
    stateDir,
    source: `file://${weights}`,
    api,
    async restartAgent() {
      await plane.agent.stop('SIGKILL');
      plane.agent = startAgent();
      return plane.agent;
    },
  };
  return plane;
}

/** One process's environment, as the kernel holds it. */
function environOf(pid: number): Map<string, string> {
  const out = new Map<string, string>();
  for (const entry of readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0')) {
    const eq = entry.indexOf('=');
    if (eq > 0) out.set(entry.slice(0, eq), entry.slice(eq + 1));
  }
  return out;
}

const chatBody = JSON.stringify({ model: 'chat', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 });

describe('engines take a credential, a scrubbed environment, and profiles cannot smuggle code', () => {
  let plane: Plane;
  let replica: ReplicaView;
  let key = '';

  beforeAll(async () => {
    plane = await startPlane('main', 27310);
    const added = await plane.api('POST', '/api/v1/models', {
      name: 'chat',
      source: plane.source,
      scaling: { min: 1 },
      profiles: [{ engine: 'sim', args: ['--ttft-ms', '1'] }],
    });
    expect(added.status, JSON.stringify(added.body)).toBe(200);
    const created = await plane.api<{ secret: string }>('POST', '/api/v1/keys', { name: 'client' });
    expect(created.status).toBe(201);
    key = created.body.secret;
    replica = await waitFor(
      'a ready replica of chat',
      async () => {
        const { body } = await plane.api<ReplicaView[]>('GET', '/api/v1/replicas?model=chat');
        return body.find((r) => r.state === 'ready' && r.endpoint);
      },
      60_000,
    );
  }, 120_000);

  it('refuses a request sent straight to an engine port, with no key or with a client key, while the router serves it', async () => {
    // Attack: with engines on a reachable address, a caller skips API keys, limits and accounting by posting to the engine's port.
    const endpoint = replica.endpoint!;
    const pidBefore = engineRecordOf([plane.stateDir], replica.id).pid;
    const bare = await fetch(`${endpoint}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: chatBody,
    });
    expect(bare.status, 'no key: refused by the engine').toBe(401);
    const body = (await bare.json()) as { error?: { message?: string } };
    expect(body.error?.message, "OpenAI's error shape").toMatch(/API key/);
    const withClientKey = await fetch(`${endpoint}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: chatBody,
    });
    expect(withClientKey.status, "a client's API key is not the engine's secret").toBe(401);
    expect((await fetch(`${endpoint}/v1/models`)).status, 'listing models is guarded too').toBe(401);
    expect((await fetch(`${endpoint}/health`)).status, "the agent's probe stays open").toBe(200);

    const routed = await fetch(`${plane.control.urls.client}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: chatBody,
    });
    expect(routed.status, 'the same request through the router is served').toBe(200);

    // Nothing changed: the same replica on the same engine process, still ready; the node still up; no key made.
    const { body: after } = await plane.api<ReplicaView[]>('GET', '/api/v1/replicas?model=chat');
    expect(after.map((r) => [r.id, r.state, r.endpoint])).toEqual([[replica.id, 'ready', endpoint]]);
    expect(engineRecordOf([plane.stateDir], replica.id).pid, 'the engine was not restarted').toBe(pidBefore);
    const { body: nodes } = await plane.api<{ liveness: string }[]>('GET', '/api/v1/nodes');
    expect(nodes.map((n) => n.liveness)).toEqual(['up']);
    const { body: listed } = await plane.api<{ keys: unknown[] }>('GET', '/api/v1/keys');
    expect(listed.keys, 'only the test key exists').toHaveLength(1);
  });

  it('never shows the engine secret in an admin view or a log line', async () => {
    // Attack: reading the secret where it leaks (admin API, logs) would make the engine key worthless.
    const secret = engineRecordOf([plane.stateDir], replica.id).launch.apiKey;
    expect(secret, 'the agent started the engine with the replica secret').toMatch(/^llmgw-es-[A-Za-z0-9_-]{43}$/);
    for (const path of ['/api/v1/replicas', '/api/v1/nodes', '/api/v1/summary', '/api/v1/models']) {
      const res = await fetch(`${plane.control.urls.admin}${path}`, { headers: admin });
      expect(await res.text(), path).not.toContain(secret!);
    }
    expect(plane.control.lines.join('\n') + plane.control.stderr(), 'the control plane log (debug)').not.toContain(
      secret!,
    );
    expect(plane.agent.lines.join('\n') + plane.agent.stderr(), 'the agent log (debug)').not.toContain(secret!);
  });

  it("starts the engine without the agent's secrets in its environment, keeping the agent's marks", () => {
    // Attack: model code (trust_remote_code) reads LLMGW_JOIN_TOKEN or HF_TOKEN from the environment it inherited from the agent.
    const env = environOf(engineRecordOf([plane.stateDir], replica.id).pid);
    for (const name of ['LLMGW_JOIN_TOKEN', 'HF_TOKEN', 'SECRET_CANARY'])
      expect(env.has(name), `${name} reached the engine`).toBe(false);
    const values = [...env.values()].join('\n');
    for (const canary of [JOIN, HF_CANARY, SECRET_CANARY])
      expect(values, 'no canary value under another name').not.toContain(canary);
    expect(env.get('LLMGW_SHARD_ID'), 'the mark that lets a restarted agent find its engine').toBeTruthy();
    expect(env.get('LLMGW_AGENT_STATE_DIR')).toBe(plane.stateDir);
    expect(env.has('PATH')).toBe(true);
    // The agent that holds them is still up and its node still reports.
    expect(plane.agent.child.exitCode).toBeNull();
  });

  it('keeps an adopted engine keyed and serving after its agent restarts', async () => {
    // Attack surface: an agent restart must neither drop the engine's key nor break routing to the engine it adopts.
    const { pid, launch } = engineRecordOf([plane.stateDir], replica.id);
    const agent = await plane.restartAgent();
    const found = await agent.waitForLog((e) => e.msg === 'found engines from an earlier agent', 60_000);
    expect(found.adopted, 'the engine was adopted, not started again').toHaveLength(1);
    await waitFor('the node up again and the replica ready', async () => {
      const { body: nodes } = await plane.api<{ liveness: string }[]>('GET', '/api/v1/nodes');
      const { body: replicas } = await plane.api<ReplicaView[]>('GET', '/api/v1/replicas?model=chat');
      return nodes[0]?.liveness === 'up' && replicas[0]?.id === replica.id && replicas[0].state === 'ready'
        ? true
        : undefined;
    });
    const again = engineRecordOf([plane.stateDir], replica.id);
    expect(
      [again.pid, again.launch.apiKey],
      'the same engine with the same secret, heard again from the assignment',
    ).toEqual([pid, launch.apiKey]);
    const routed = await fetch(`${plane.control.urls.client}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: chatBody,
    });
    expect(routed.status, 'the router still reaches it').toBe(200);
    expect(
      (
        await fetch(`${replica.endpoint!}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: chatBody,
        })
      ).status,
      'and it still refuses strangers',
    ).toBe(401);
  });

  it('refuses a model whose profile env would load code, naming the key, and adds nothing', async () => {
    // Attack: a profile env NODE_OPTIONS=--import=data:… ran code on a GPU node.
    const names = async () => (await plane.api<{ name: string }[]>('GET', '/api/v1/models')).body.map((m) => m.name);
    const before = await names();
    const evil = {
      name: 'evil',
      source: plane.source,
      scaling: { min: 1 },
      profiles: [{ engine: 'sim', env: { NODE_OPTIONS: '--import=data:text/javascript,process.exit(7)' } }],
    };
    for (const path of ['/api/v1/models', '/api/v1/models?force=true']) {
      const res = await plane.api<{ error: string }>('POST', path, evil);
      expect(res.status, path).toBe(400);
      expect(res.body.error, 'the refusal names the key and the way out').toMatch(
        /NODE_OPTIONS.*allow_unsafe_profile_env/,
      );
    }
    expect(await names(), 'the catalog is unchanged').toEqual(before);
    expect(before).toEqual(['chat']);
    const { body: replicas } = await plane.api<ReplicaView[]>('GET', '/api/v1/replicas');
    expect(replicas.map((r) => r.model)).toEqual(['chat']);
  });
});

describe('the agent refuses unsafe profile env on its own', () => {
  it('fails the shard naming the key when a control plane lets NODE_OPTIONS through, and no engine runs it', async () => {
    // Attack: a control plane that lets a hook through (tampered, or run with allow_unsafe_profile_env) makes the node run code.
    const plane = await startPlane('lax', 27370, ['--allow-unsafe-profile-env', 'true']);
    const canaryDir = mkdtempSync(join(tmpdir(), 'llmgw-sec-canary-'));
    const marker = join(canaryDir, 'ran');
    const hook = join(canaryDir, 'hook.cjs');
    writeFileSync(hook, `require('node:fs').writeFileSync(${JSON.stringify(marker)}, 'ran');\n`);
    const added = await plane.api('POST', '/api/v1/models', {
      name: 'evil',
      source: plane.source,
      scaling: { min: 1 },
      profiles: [{ engine: 'sim', env: { NODE_OPTIONS: `--require=${hook}` } }],
    });
    expect(added.status, 'this control plane was told to allow it').toBe(200);
    const failed = await waitFor(
      'the agent to refuse the shard',
      async () => {
        const { body } = await plane.api<ReplicaView[]>('GET', '/api/v1/replicas?model=evil');
        const error = body[0]?.error ?? body[0]?.shards[0]?.error;
        return error ? error : undefined;
      },
      60_000,
    );
    expect(failed).toMatch(/NODE_OPTIONS is a loader or interpreter hook.*--allow-unsafe-profile-env/);
    expect(existsSync(marker), 'the hook never ran').toBe(false);
    const shards = join(plane.stateDir, 'shards');
    expect(
      existsSync(shards) ? readdirSync(shards).filter((f) => f.endsWith('.json')) : [],
      'no engine was started',
    ).toEqual([]);
    const { body: nodes } = await plane.api<{ liveness: string }[]>('GET', '/api/v1/nodes');
    expect(
      nodes.map((n) => n.liveness),
      'the node is still up',
    ).toEqual(['up']);
  }, 120_000);
});
