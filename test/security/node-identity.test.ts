// Node identity under attack, replayed against a real control plane and real
// agents over loopback. The attack (issue 17): anyone holding the fleet's
// join token joined under a live node's id, was handed a fresh credential,
// and took the node's assignments (with the profile env) and its mgmt_addr,
// while the real node got 401 and the two flipped. Each test names what it
// replays, asserts the refusal and that nothing changed for the real node.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { JoinTokenView, NodeView, SummaryView } from '../../src/api/index.js';
import { runCtlCli } from '../e2e/ctl-support.js';
import { ADMIN, Fleet, JOIN } from '../faults/fleet-support.js';
import { freePort, killEnginesOf, stopAll } from '../support/processes.js';
import { waitFor } from '../support/wait.js';

const fleets: Fleet[] = [];

afterAll(async () => {
  await stopAll();
  for (const f of fleets) killEnginesOf(f.stateDirs);
});

/** Each test its own fleet and its own slice of engine ports (32000-32399, beside the fault tests' 30000-31999). */
function newFleet(name: string, firstPort: number): Fleet {
  const fleet = new Fleet(mkdtempSync(join(tmpdir(), `llmgw-security-${name}-`)), firstPort);
  fleets.push(fleet);
  return fleet;
}

interface Saved {
  node_id: string;
  credential: string;
  mgmt_token: string;
}

function savedIdentity(fleet: Fleet, id: string): Saved {
  return JSON.parse(readFileSync(join(fleet.stateDir(id), 'node.json'), 'utf8')) as Saved;
}

async function agentCall(
  fleet: Fleet,
  path: string,
  body: unknown,
  credential?: string,
): Promise<{ status: number; text: string; json: Record<string, unknown> }> {
  const res = await fetch(`${fleet.agentUrl}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(credential ? { authorization: `Bearer ${credential}` } : {}) },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // Not JSON: the status and text say enough.
  }
  return { status: res.status, text, json };
}

function ctl(fleet: Fleet, args: string[]) {
  return runCtlCli(args, { env: { LLMGW_ADMIN_URL: fleet.admin, LLMGW_ADMIN_TOKEN: ADMIN } });
}

async function node(fleet: Fleet, id: string): Promise<NodeView | undefined> {
  return (await fleet.nodes()).find((n) => n.id === id);
}

async function reconcilerPasses(fleet: Fleet): Promise<number> {
  const res = await fetch(`${fleet.admin}/metrics`, { headers: { authorization: `Bearer ${ADMIN}` } });
  return Number(/^llmgw_reconciler_passes_total (\d+)$/m.exec(await res.text())?.[1] ?? 0);
}

/** Returns once the control plane has run `passes` more reconciler passes: time passing, measured by the system itself. */
async function afterPasses(fleet: Fleet, passes: number): Promise<void> {
  const from = await reconcilerPasses(fleet);
  await waitFor(`${passes} reconciler passes`, async () =>
    (await reconcilerPasses(fleet)) >= from + passes ? true : undefined,
  );
}

describe('node identity', () => {
  it('refuses a second joiner under live n1: the real n1 keeps heartbeating, its assignments and its mgmt_addr', async () => {
    // Replays: POST /agent/v1/join {"node_id":"n1"} with the shared join token while n1 is up, then the
    // same with a guessed "credential"; before, the joiner got a credential and n1's assignments.
    const fleet = newFleet('takeover', 32000);
    // Stale after 1 s: "still up" later means a heartbeat within the last second.
    await fleet.startControl(['--reconcile-interval', '300ms', '--node-stale-after', '1s']);
    const n1 = fleet.startAgent('n1', ['--log-level', 'info']);
    await fleet.nodesUp(1);
    await fleet.addModel({
      name: 'secret-env',
      scaling: { min: 1 },
      profiles: [{ engine: 'sim', env: { SECRET: 's3cret' } }],
    });
    const [replica] = await fleet.ready('secret-env', 1);
    const before = (await node(fleet, 'n1'))!;
    const saved = savedIdentity(fleet, 'n1');

    const takeover = await agentCall(fleet, '/agent/v1/join', {
      join_token: JOIN,
      node_id: 'n1',
      hostname: 'evil',
      mgmt_addr: '127.0.0.1:9',
    });
    expect(takeover.status, takeover.text).toBe(409);
    expect(takeover.text).toContain('belongs to a node that is up');
    expect(takeover.text, 'no credential handed out').not.toContain('credential"');
    const guessed = await agentCall(fleet, '/agent/v1/join', {
      join_token: JOIN,
      node_id: 'n1',
      mgmt_addr: '127.0.0.1:9',
      credential: 'a-guess',
    });
    expect(guessed.status, guessed.text).toBe(409);

    // The real n1 still holds the id: its saved credential is answered with its assignment.
    const beat = await agentCall(fleet, '/agent/v1/heartbeat', { node_id: 'n1' }, saved.credential);
    expect(beat.status, beat.text).toBe(200);
    expect((beat.json.shards as { replica_id: string }[]).map((s) => s.replica_id)).toEqual([replica!.id]);
    // And it keeps heartbeating on its own: several passes (well past the 1 s stale window) later, still up.
    await afterPasses(fleet, 8);
    const after = (await node(fleet, 'n1'))!;
    expect(after.liveness).toBe('up');
    expect(n1.lines.join('\n'), 'the real agent was never refused').not.toContain('no longer knows this node');
    expect(after.mgmt_addr, 'the joiner did not set its mgmt_addr').toBe(before.mgmt_addr);
    expect(after.hostname).toBe(before.hostname);
    expect(savedIdentity(fleet, 'n1').credential, 'the real agent never had to join again').toBe(saved.credential);
    expect((await fleet.replicas('secret-env')).map((r) => [r.id, r.state, r.shards[0]!.node])).toEqual([
      [replica!.id, 'ready', 'n1'],
    ]);
  }, 120_000);

  it('gives the id back to a join that proves the old credential, while the node is still live', async () => {
    // Replays the legitimate side of the same call: an agent that lost its session (401) joins again
    // under its live id, sending the credential it saved; a join without it is refused meanwhile.
    const fleet = newFleet('proof', 32040);
    await fleet.startControl([]);
    const agent = fleet.startAgent('p1');
    await fleet.nodesUp(1);
    const saved = savedIdentity(fleet, 'p1');
    await agent.stop('SIGKILL');
    const without = await agentCall(fleet, '/agent/v1/join', { join_token: JOIN, node_id: 'p1' });
    expect(without.status, without.text).toBe(409);
    const proven = await agentCall(fleet, '/agent/v1/join', {
      join_token: JOIN,
      node_id: 'p1',
      credential: saved.credential,
    });
    expect(proven.status, proven.text).toBe(200);
    const beat = await agentCall(fleet, '/agent/v1/heartbeat', { node_id: 'p1' }, proven.json.credential as string);
    expect(beat.status, beat.text).toBe(200);
    const stale = await agentCall(fleet, '/agent/v1/heartbeat', { node_id: 'p1' }, saved.credential);
    expect(stale.status, 'the old credential is replaced').toBe(401);
  }, 60_000);

  it('frees the id after ctl nodes rm (refused while it runs replicas), and after the node is lost', async () => {
    // Replays recovery of a machine whose state directory was lost: a fresh agent under a live id is
    // refused (and says why in its log) until an admin removes the node, or until it is lost.
    const fleet = newFleet('rm-lost', 32080);
    // Lost after 15 s, not sooner: `ctl nodes rm --force` below must find r1 still holding its replica after the kill,
    // and with 4 s a loaded CI machine once took longer than that to start ctl, so the replica had already moved.
    await fleet.startControl(['--reconcile-interval', '300ms', '--node-stale-after', '1s', '--node-lost-after', '15s']);
    let r1 = fleet.startAgent('r1');
    await fleet.nodesUp(1);
    await fleet.addModel({ name: 'on-r1', scaling: { min: 1 }, profiles: [{ engine: 'sim' }] });
    await fleet.ready('on-r1', 1);

    const refused = await ctl(fleet, ['nodes', 'rm', 'r1', '--yes']);
    expect(refused.code, refused.stderr).not.toBe(0);
    expect(refused.stderr).toMatch(/runs 1 replica; drain it first/);
    expect((await node(fleet, 'r1'))?.liveness, 'still there').toBe('up');

    await r1.stop('SIGKILL');
    rmSync(fleet.stateDir('r1'), { recursive: true, force: true });
    const removed = await ctl(fleet, ['nodes', 'rm', 'r1', '--yes', '--force']);
    expect(removed.code, removed.stderr).toBe(0);
    expect(removed.stdout).toContain('replaced elsewhere');
    expect(await node(fleet, 'r1'), 'gone from the fleet').toBeUndefined();
    r1 = fleet.startAgent('r1', ['--log-level', 'info']);
    await r1.waitForLog((e) => e.msg === 'joined');
    await fleet.nodesUp(1);

    // Lost: the same machine again without its state, refused while r1 is live, admitted once it is lost.
    await r1.stop('SIGKILL');
    rmSync(fleet.stateDir('r1'), { recursive: true, force: true });
    r1 = fleet.startAgent('r1', ['--log-level', 'info']);
    const why = await r1.waitForLog((e) => e.msg === 'join refused: the node id belongs to a live node; retrying');
    expect(String(why.err)).toContain('llmgw ctl nodes rm r1');
    await r1.waitForLog((e) => e.msg === 'joined', 60_000);
    await waitFor(
      'r1 back once its old self was lost',
      async () => ((await node(fleet, 'r1'))?.liveness === 'up' ? true : undefined),
      60_000,
    );
  }, 180_000);

  it('a per-node join token admits its node once, no other node, and not after it expires', async () => {
    // Replays a leaked per-node token: used again, used for another node id, used after its expiry.
    const fleet = newFleet('node-token', 32120);
    await fleet.startControl([]);
    const created = await ctl(fleet, ['join-token', 'create', '--node', 't1', '--expires', '1h']);
    expect(created.code, created.stderr).toBe(0);
    const token = /^token: (\S+)$/m.exec(created.stdout)![1]!;
    const other = await agentCall(fleet, '/agent/v1/join', { join_token: token, node_id: 't2' });
    expect(other.status, 'another node id').toBe(401);
    fleet.startAgent('t1', ['--join-token', token]);
    await fleet.nodesUp(1);
    const again = await agentCall(fleet, '/agent/v1/join', { join_token: token, node_id: 't1' });
    expect(again.status, 'single use').toBe(401);
    expect(again.text).toContain('unknown, used, expired or for another node');
    expect((await node(fleet, 't1'))?.liveness, 'the node that used it is untouched').toBe('up');

    const short = await fleet.api<{ token: string; id: string }>('POST', '/api/v1/join-tokens', {
      node: 't3',
      expires: '1s',
    });
    expect(short.status).toBe(201);
    await waitFor('the short token expired', async () => {
      const list = (await fleet.api<JoinTokenView[]>('GET', '/api/v1/join-tokens')).body;
      return list.find((t) => t.id === short.body.id)?.status === 'expired' ? true : undefined;
    });
    const late = await agentCall(fleet, '/agent/v1/join', { join_token: short.body.token, node_id: 't3' });
    expect(late.status, 'expired').toBe(401);
    expect(await node(fleet, 't3'), 'no node created').toBeUndefined();

    const listed = await ctl(fleet, ['join-token', 'ls']);
    expect(listed.stdout).toMatch(/t1\W+used/);
    expect(listed.stdout).toMatch(/t3\W+expired/);
    expect(
      listed.stdout + JSON.stringify((await fleet.api('GET', '/api/v1/join-tokens')).body),
      'never a secret',
    ).not.toContain('llmgw-njt-');
  }, 90_000);

  it('with join_approval: manual, holds a new node and a node whose GPUs changed out of placement until approved', async () => {
    // Replays a stranger's machine joining with the shared token and a node claiming other hardware:
    // neither may take placements (nor receive a profile's env) before an admin approves it.
    const fleet = newFleet('approval', 32160);
    await fleet.startControl(['--reconcile-interval', '300ms', '--join-approval', 'manual']);
    let a1 = fleet.startAgent('a1', ['--simulate', 'gpus=1xh100-80gb,ram=64g']);
    await waitFor('a1 joined', async () => ((await node(fleet, 'a1'))?.liveness === 'up' ? true : undefined));
    expect((await node(fleet, 'a1'))?.approval).toBe('pending');
    const add = await fleet.api('POST', '/api/v1/models?force=true', {
      source: fleet.weights(),
      name: 'gpu-model',
      scaling: { min: 1 },
      profiles: [{ engine: 'sim', gpus: 1 }],
    });
    expect(add.status, JSON.stringify(add.body)).toBe(200);
    await waitFor('placement says a1 waits for approval', async () => {
      const e = await fleet.api<{ summary?: string; rejections?: { reason: string }[] }>(
        'GET',
        '/api/v1/explain-placement?model=gpu-model',
      );
      return JSON.stringify(e.body).includes('approv') ? true : undefined;
    });
    expect(await fleet.replicas('gpu-model'), 'nothing placed on a pending node').toEqual([]);
    const listed = await ctl(fleet, ['nodes']);
    expect(listed.stdout).toContain('pending approval');

    const approved = await ctl(fleet, ['nodes', 'approve', 'a1']);
    expect(approved.code, approved.stderr).toBe(0);
    const [replica] = await fleet.ready('gpu-model', 1);

    // The same node id comes back claiming two GPUs: flagged, held out again, its replica kept.
    await a1.stop('SIGKILL');
    a1 = fleet.startAgent('a1', ['--simulate', 'gpus=2xh100-80gb,ram=64g']);
    const flagged = await waitFor('the GPU change flagged', async () => {
      const n = await node(fleet, 'a1');
      return n?.hardware_change && n.liveness === 'up' ? n : undefined;
    });
    expect(flagged.hardware_change).toBe('GPUs changed from 1 gpu: h100-80gb to 2 gpus: h100-80gb, h100-80gb');
    expect(flagged.approval).toBe('pending');
    const summary = (await fleet.api<SummaryView>('GET', '/api/v1/summary')).body;
    expect(summary.attention.join('\n')).toContain('a1: GPUs changed');
    const events = (await fleet.api<{ events: { kind: string }[] }>('GET', '/api/v1/events')).body;
    expect(JSON.stringify(events)).toContain('node_hardware_changed');
    const add2 = await fleet.api('POST', '/api/v1/models?force=true', {
      source: fleet.weights(),
      name: 'second',
      scaling: { min: 1 },
      profiles: [{ engine: 'sim', gpus: 1 }],
    });
    expect(add2.status).toBe(200);
    await waitFor('placement says a1 waits for approval again', async () => {
      const e = await fleet.api('GET', '/api/v1/explain-placement?model=second');
      return JSON.stringify(e.body).includes('approv') ? true : undefined;
    });
    expect(await fleet.replicas('second'), 'held out of placement').toEqual([]);
    expect(
      (await fleet.replicas('gpu-model')).map((r) => r.id),
      'what it ran stays',
    ).toEqual([replica!.id]);
    expect((await ctl(fleet, ['nodes', 'approve', 'a1'])).code).toBe(0);
    await fleet.ready('second', 1);
    expect((await node(fleet, 'a1'))?.hardware_change).toBeUndefined();
  }, 180_000);

  it('keeps no plaintext management token in the SQLite file, and still reaches the agent after the join token rotates', async () => {
    // Replays reading the store file: before, each node's mgmt_token (the bearer for its management API)
    // sat there in plain text. Then rotates the join token, which changes every derived token.
    const fleet = newFleet('store-bytes', 32200);
    // The agent listener keeps its port across the restart: the agent was told one URL.
    const agentAddr = `127.0.0.1:${await freePort()}`;
    const control = await fleet.startControl(['--reconcile-interval', '300ms', '--agent-addr', agentAddr]);
    fleet.startAgent('s1');
    await fleet.nodesUp(1);
    await fleet.addModel({ name: 'logged', scaling: { min: 1 }, profiles: [{ engine: 'sim' }] });
    const [replica] = await fleet.ready('logged', 1);
    const logs = await fleet.api<{ lines: string[] }>('GET', `/api/v1/replicas/${replica!.id}/log`);
    expect(logs.status, `the control plane presents the derived token: ${JSON.stringify(logs.body)}`).toBe(200);
    const saved = savedIdentity(fleet, 's1');
    const fileBytes = () =>
      ['db', 'db-wal']
        .map((f) => {
          try {
            return readFileSync(join(fleet.dir, f)).toString('latin1');
          } catch {
            return '';
          }
        })
        .join('');
    expect(fileBytes().includes(saved.mgmt_token), "the agent's mgmt token is not in the store file").toBe(false);
    expect(fileBytes().includes(saved.credential), 'nor its credential').toBe(false);

    await control.stop();
    await fleet.startControl([
      '--reconcile-interval',
      '300ms',
      '--agent-addr',
      agentAddr,
      '--join-token',
      'a-rotated-join-token-0123456789',
    ]);
    const rotated = await waitFor('the agent told the new management token', async () => {
      const now = savedIdentity(fleet, 's1').mgmt_token;
      return now !== saved.mgmt_token ? now : undefined;
    });
    await waitFor('logs fetched with the new token', async () =>
      (await fleet.api('GET', `/api/v1/replicas/${replica!.id}/log`)).status === 200 ? true : undefined,
    );
    expect(fileBytes().includes(rotated), 'the new token is not stored either').toBe(false);
  }, 120_000);
});
