// TLS between llmgw's parts, against real processes on loopback: `llmgw tls
// init` makes a CA and certificates; a control plane serves all three
// listeners with them; an agent that trusts the CA joins and serves a
// replica through the router, while one that trusts another CA refuses to
// talk (its join token never leaves it); plain HTTP to a TLS listener gets
// nowhere; ctl reads the fleet with --ca. An agent with --engine-tls runs
// engines that serve https under the node certificate, which the router
// verifies against engine_ca (and, without it, refuses to use, naming it). Without this, tokens and keys
// cross the network in clear, and an agent hands its join token to whoever
// answers its --control URL.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN, JOIN, weightsDir } from '../support/fleet.js';
import { killEnginesOf, type RunningProcess, startControl, startLlmgw, stopAll } from '../support/processes.js';
import { waitFor } from '../support/wait.js';

const dir = mkdtempSync(join(tmpdir(), 'llmgw-sec-tls-'));
const pki = join(dir, 'pki');
const otherPki = join(dir, 'other-pki');
const stateDirs: string[] = [];
const headers = { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json', 'x-llmgw-actor': 'tls-test' };

let control: RunningProcess & { urls: { client: string; admin: string; agent: string } };
let trusting: Agent;

afterAll(async () => {
  await stopAll();
  killEnginesOf(stateDirs);
  await trusting?.close();
});

async function run(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const proc = startLlmgw(args);
  const { code } = await proc.exited;
  return { code, stdout: proc.lines.join('\n'), stderr: proc.stderr() };
}

/** A JSON call through a client that trusts only our CA. */
async function call<T>(
  method: 'GET' | 'POST',
  url: string,
  body?: unknown,
  extra: Record<string, string> = {},
): Promise<{ status: number; json: T }> {
  const res = await request(url, {
    method,
    headers: { ...headers, ...extra },
    dispatcher: trusting,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.body.text();
  return { status: res.statusCode, json: (text ? JSON.parse(text) : null) as T };
}

const nodes = async () =>
  (await call<{ id: string; liveness: string }[]>('GET', `${control.urls.admin}/api/v1/nodes`)).json;
const keyCount = async () => (await call<unknown[]>('GET', `${control.urls.admin}/api/v1/keys`)).json.length;
/** The control plane's log lines about a join by `nodeId`, accepted or refused. */
const joinLines = (nodeId: string) =>
  control.lines.filter(
    (l) => (l.includes('"node joined"') || l.includes('"join refused')) && l.includes(`"node":"${nodeId}"`),
  );
let servingReplica = '';

/** The real node is still up and still runs the replica it ran before the attack. */
async function unchanged(): Promise<void> {
  expect(
    (await nodes()).map((n) => [n.id, n.liveness]),
    'only the real node, up',
  ).toEqual([['n1', 'up']]);
  const list = (
    await call<{ id: string; state: string }[]>('GET', `${control.urls.admin}/api/v1/replicas?model=tls-chat`)
  ).json;
  expect(
    list.map((r) => [r.id, r.state]),
    'the same replica, still ready',
  ).toEqual([[servingReplica, 'ready']]);
}

describe('TLS on every listener', () => {
  beforeAll(async () => {
    const made = await run([
      'tls',
      'init',
      pki,
      '--name',
      'n1',
      '--name',
      'e1',
      '--name',
      'e2',
      '--host',
      'control.test',
    ]);
    expect(made.code, `tls init failed: ${made.stderr}`).toBe(0);
    const other = await run(['tls', 'init', otherPki]);
    expect(other.code, other.stderr).toBe(0);
    trusting = new Agent({ connect: { ca: readFileSync(join(pki, 'ca.pem')) } });
    control = await startControl([
      '--store',
      `sqlite:${join(dir, 'llmgw.db')}`,
      '--join-token',
      JOIN,
      '--admin-token',
      ADMIN,
      '--reconcile-interval',
      '300ms',
      '--tls-cert',
      join(pki, 'control.pem'),
      '--tls-key',
      join(pki, 'control-key.pem'),
      '--agent-ca',
      join(pki, 'ca.pem'),
    ]);
  }, 60_000);

  it('tls init writes a CA and certificates openssl accepts, keys 0600, certificates 0644, the directory 0700', async () => {
    expect(readdirSync(pki).sort()).toEqual([
      'ca-key.pem',
      'ca.pem',
      'control-key.pem',
      'control.pem',
      'node-ca-key.pem',
      'node-ca.pem',
      'node-e1-key.pem',
      'node-e1.pem',
      'node-e2-key.pem',
      'node-e2.pem',
      'node-n1-key.pem',
      'node-n1.pem',
    ]);
    expect(statSync(pki).mode & 0o777, 'the directory').toBe(0o700);
    for (const f of readdirSync(pki))
      expect(statSync(join(pki, f)).mode & 0o777, f).toBe(f.endsWith('-key.pem') ? 0o600 : 0o644);
    // Node certificates come from the node CA under the root (node-NAME.pem carries it after the node's own).
    const verify = spawnSync(
      'openssl',
      [
        'verify',
        '-CAfile',
        join(pki, 'ca.pem'),
        '-untrusted',
        join(pki, 'node-ca.pem'),
        join(pki, 'control.pem'),
        join(pki, 'node-n1.pem'),
      ],
      { encoding: 'utf8' },
    );
    expect(verify.status, `openssl verify: ${verify.stdout}${verify.stderr}`).toBe(0);
    const text = spawnSync('openssl', ['x509', '-in', join(pki, 'control.pem'), '-noout', '-ext', 'subjectAltName'], {
      encoding: 'utf8',
    }).stdout;
    for (const san of ['DNS:control.test', 'DNS:localhost', 'IP Address:127.0.0.1', 'IP Address:0:0:0:0:0:0:0:1'])
      expect(text, 'the control plane certificate names it').toContain(san);
    const node = spawnSync('openssl', ['x509', '-in', join(pki, 'node-n1.pem'), '-noout', '-ext', 'subjectAltName'], {
      encoding: 'utf8',
    }).stdout;
    expect(node).toContain('DNS:n1');
    expect(node, 'a node certificate never names loopback').not.toMatch(/localhost|127\.0\.0\.1|0:0:0:0:0:0:0:1/);
    const issuer = spawnSync('openssl', ['x509', '-in', join(pki, 'node-n1.pem'), '-noout', '-issuer'], {
      encoding: 'utf8',
    }).stdout;
    expect(issuer, 'signed by the node CA, not the root agents take the control plane from').toContain('llmgw node CA');
    const wrong = spawnSync('openssl', ['verify', '-CAfile', join(otherPki, 'ca.pem'), join(pki, 'control.pem')], {
      encoding: 'utf8',
    });
    expect(wrong.status, 'another CA does not vouch for it').not.toBe(0);

    // Run again over the same directory: refused, and nothing is touched.
    const before = readFileSync(join(pki, 'ca-key.pem'), 'utf8');
    const again = await run(['tls', 'init', pki]);
    expect(again.code).not.toBe(0);
    expect(again.stderr).toContain('--force');
    expect(readFileSync(join(pki, 'ca-key.pem'), 'utf8'), 'the CA key is unchanged').toBe(before);
  });

  it('serves every listener over https', () => {
    for (const url of Object.values(control.urls)) expect(url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
  });

  it('an agent with --ca joins, gets a replica served through the router, and its management API is called over https', async () => {
    const stateDir = join(dir, 'n1');
    stateDirs.push(stateDir);
    startLlmgw([
      'agent',
      '--control',
      control.urls.agent,
      '--ca',
      join(pki, 'ca.pem'),
      '--join-token',
      JOIN,
      '--node-id',
      'n1',
      '--tls-cert',
      join(pki, 'node-n1.pem'),
      '--tls-key',
      join(pki, 'node-n1-key.pem'),
      '--state-dir',
      stateDir,
      '--simulate',
      'gpus=0,ram=16g',
      '--heartbeat-interval',
      '300ms',
      '--port-range',
      '31750-31789',
      '--log-level',
      'warn',
    ]);
    await waitFor('n1 up', async () =>
      (await nodes()).some((n) => n.id === 'n1' && n.liveness === 'up') ? true : undefined,
    );
    const added = await call('POST', `${control.urls.admin}/api/v1/models`, {
      name: 'tls-chat',
      source: weightsDir(dir),
      scaling: { min: 1 },
      profiles: [{ engine: 'sim', args: ['--ttft-ms', '1'] }],
    });
    expect(added.status, JSON.stringify(added.json)).toBe(200);
    const replica = await waitFor(
      'a ready replica',
      async () => {
        const list = (
          await call<{ id: string; state: string }[]>('GET', `${control.urls.admin}/api/v1/replicas?model=tls-chat`)
        ).json;
        return list.find((r) => r.state === 'ready');
      },
      60_000,
    );
    const key = await call<{ secret: string }>('POST', `${control.urls.admin}/api/v1/keys`, { name: 'tls' });
    expect(key.status).toBe(201);
    const answer = await call<{ choices: unknown[] }>(
      'POST',
      `${control.urls.client}/v1/chat/completions`,
      { model: 'tls-chat', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 },
      { authorization: `Bearer ${key.json.secret}` },
    );
    expect(answer.status, JSON.stringify(answer.json)).toBe(200);
    expect(answer.json.choices.length).toBeGreaterThan(0);
    // The log comes from the agent's management API, which now speaks only TLS under the node's certificate.
    const log = await call<{ node: string; lines: string[] }>(
      'GET',
      `${control.urls.admin}/api/v1/replicas/${replica.id}/log?lines=5`,
    );
    expect(log.status, `fetching the log over https failed: ${JSON.stringify(log.json)}`).toBe(200);
    expect(log.json.node).toBe('n1');
    servingReplica = replica.id;
  });

  // Attack: a control plane impostor (here: a real one under a certificate from another CA) waits for agents;
  // an agent that trusted it would hand over its join token.
  it('an agent that trusts another CA refuses the control plane and never sends its join token', async () => {
    const stateDir = join(dir, 'wrong');
    const wrong = startLlmgw([
      'agent',
      '--control',
      control.urls.agent,
      '--ca',
      join(otherPki, 'ca.pem'),
      '--join-token',
      JOIN,
      '--node-id',
      'wrong',
      '--state-dir',
      stateDir,
      '--simulate',
      'gpus=0,ram=16g',
      '--heartbeat-interval',
      '300ms',
      '--port-range',
      '31790-31799',
      '--log-level',
      'warn',
    ]);
    // Two failed attempts: it keeps refusing, not a one-off.
    let attempts = 0;
    const refused = await wrong.waitForLog(
      (e) =>
        e.msg === 'cannot join yet; retrying' &&
        /certificate|self.signed|issuer/i.test(String(e.err)) &&
        ++attempts >= 2,
    );
    expect(String(refused.hint), 'the log says what to fix').toContain('give --ca the ca.pem that signed it');
    expect(joinLines('wrong'), 'the control plane saw no join at all: the token never reached it').toEqual([]);
    await wrong.stop();
    await unchanged();
  });

  // Attack: sniffing or downgrading: a client speaks plain HTTP to a TLS listener, hoping to be answered in clear.
  it('plain HTTP to a TLS listener gets no answer, and changes nothing', async () => {
    const keysBefore = await keyCount();
    const plain = (url: string) => url.replace('https://', 'http://');
    await expect(
      request(`${plain(control.urls.admin)}/api/v1/keys`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ name: 'sneak' }),
      }),
      'admin listener',
    ).rejects.toThrow();
    await expect(
      request(`${plain(control.urls.agent)}/agent/v1/join`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ join_token: JOIN, node_id: 'sneak' }),
      }),
      'agent listener',
    ).rejects.toThrow();
    await expect(request(`${plain(control.urls.client)}/v1/models`), 'client listener').rejects.toThrow();
    expect(await keyCount(), 'no key was created').toBe(keysBefore);
    expect(joinLines('sneak'), 'no join reached the control plane').toEqual([]);
    await unchanged();
  });

  // Without TLS to engines, clients' prompts and answers crossed the fleet network in clear between the
  // router and the engines, and the router could not tell an engine from anything else listening on its port.
  describe('TLS to engines (agent --engine-tls, control plane engine_ca)', () => {
    /** A TLS control plane, with or without engine_ca, and one agent with --engine-tls running a ready sim replica of `model`. */
    async function engineTlsFleet(name: string, engineCa: boolean, ports: string) {
      const cp = await startControl([
        '--store',
        `sqlite:${join(dir, `${name}.db`)}`,
        '--join-token',
        JOIN,
        '--admin-token',
        ADMIN,
        '--reconcile-interval',
        '300ms',
        '--tls-cert',
        join(pki, 'control.pem'),
        '--tls-key',
        join(pki, 'control-key.pem'),
        '--agent-ca',
        join(pki, 'ca.pem'),
        ...(engineCa ? ['--engine-ca', join(pki, 'ca.pem')] : []),
      ]);
      const stateDir = join(dir, name);
      stateDirs.push(stateDir);
      startLlmgw([
        'agent',
        '--control',
        cp.urls.agent,
        '--ca',
        join(pki, 'ca.pem'),
        '--join-token',
        JOIN,
        '--node-id',
        name,
        '--tls-cert',
        join(pki, `node-${name}.pem`),
        '--tls-key',
        join(pki, `node-${name}-key.pem`),
        '--engine-tls',
        '--state-dir',
        stateDir,
        '--simulate',
        'gpus=0,ram=16g',
        '--heartbeat-interval',
        '300ms',
        '--port-range',
        ports,
        '--log-level',
        'warn',
      ]);
      await waitFor(`${name} up`, async () => {
        const list = (await call<{ id: string; liveness: string }[]>('GET', `${cp.urls.admin}/api/v1/nodes`)).json;
        return list.some((n) => n.id === name && n.liveness === 'up') ? true : undefined;
      });
      const model = `${name}-chat`;
      const added = await call('POST', `${cp.urls.admin}/api/v1/models`, {
        name: model,
        source: weightsDir(dir),
        scaling: { min: 1 },
        profiles: [{ engine: 'sim', args: ['--ttft-ms', '1'] }],
      });
      expect(added.status, JSON.stringify(added.json)).toBe(200);
      const replica = await waitFor(
        `a ready replica of ${model}`,
        async () => {
          const list = (
            await call<{ id: string; state: string; endpoint?: string }[]>(
              'GET',
              `${cp.urls.admin}/api/v1/replicas?model=${model}`,
            )
          ).json;
          return list.find((r) => r.state === 'ready');
        },
        60_000,
      );
      const key = await call<{ secret: string }>('POST', `${cp.urls.admin}/api/v1/keys`, { name });
      expect(key.status).toBe(201);
      const chat = () =>
        call<{ choices?: unknown[]; error?: { message: string } }>(
          'POST',
          `${cp.urls.client}/v1/chat/completions`,
          { model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 },
          { authorization: `Bearer ${key.json.secret}` },
        );
      return { cp, replica, chat };
    }

    it('an engine serves https under the node certificate: reported as https, routed to with engine_ca, deaf to plain http', async () => {
      const { replica, chat } = await engineTlsFleet('e1', true, '31800-31819');
      expect(replica.endpoint, 'the agent reports the engine as https').toMatch(/^https:\/\/127\.0\.0\.1:318[01]\d$/);
      const answer = await chat();
      expect(answer.status, JSON.stringify(answer.json)).toBe(200);
      expect(answer.json.choices?.length).toBeGreaterThan(0);
      // Sniffing or downgrading at the engine port: plain http gets no answer at all.
      const port = new URL(replica.endpoint!).port;
      await expect(request(`http://127.0.0.1:${port}/health`), 'plain http to the engine port').rejects.toThrow();
      await expect(request(`http://127.0.0.1:${port}/v1/models`), 'plain http to the engine API').rejects.toThrow();
      // The node certificate names the node, not loopback: a client asks for it by the node's name, as the router does.
      const byName = new Agent({ connect: { ca: readFileSync(join(pki, 'ca.pem')), servername: 'e1' } });
      try {
        const health = await request(`https://127.0.0.1:${port}/health`, { dispatcher: byName });
        await health.body.dump();
        expect(health.statusCode, 'https under the node CA answers').toBe(200);
      } finally {
        await byName.close();
      }
    }, 90_000);

    it('a control plane without engine_ca cannot route to such an engine, and says to set engine_ca', async () => {
      const { cp, replica, chat } = await engineTlsFleet('e2', false, '31820-31839');
      expect(replica.endpoint).toMatch(/^https:\/\//);
      const answer = await chat();
      expect(answer.status, 'the router cannot verify the engine against the system CAs').toBe(502);
      expect(answer.json.error?.message, 'the answer names the key to set').toContain('engine_ca');
      const logged = await cp.waitForLog(
        (e) => e.msg === 'upstream attempt failed before the first byte' && String(e.reason).includes('engine_ca'),
      );
      expect(String(logged.reason)).toMatch(/not signed by a CA this process trusts/);
    }, 90_000);
  });

  it('ctl reads the summary with --ca, and without it says which flag is missing', async () => {
    const ok = await run([
      'ctl',
      '--admin-url',
      control.urls.admin,
      '--token',
      ADMIN,
      '--ca',
      join(pki, 'ca.pem'),
      '-o',
      'json',
      'summary',
    ]);
    expect(ok.code, ok.stderr).toBe(0);
    expect((JSON.parse(ok.stdout) as { nodes: { total: number } }).nodes.total).toBeGreaterThanOrEqual(1);
    const untrusted = await run(['ctl', '--admin-url', control.urls.admin, '--token', ADMIN, '-o', 'json', 'summary']);
    expect(untrusted.code).not.toBe(0);
    expect(untrusted.stderr, 'it names the flag to set').toContain('give --ca (or LLMGW_CA) the ca.pem that signed it');
  });
});
