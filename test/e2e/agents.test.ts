// Agents as real processes against a real control plane, over loopback: they
// join with the join token, report, go stale then lost when killed, and a
// cordon outlives a control-plane restart. An older agent's report is read.
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startControl, startLlmgw, stopAll } from '../support/processes.js';
import { waitFor } from '../support/wait.js';

afterAll(stopAll);

const JOIN = 'e2e-join-token-0123456789abcdef';
const ADMIN = 'e2e-admin-token-0123456789abcdef';
const auth = { authorization: `Bearer ${ADMIN}` };

interface NodeView {
  id: string;
  state: string;
  liveness: string;
  gpu_total: number;
  gpu_free: number;
  memory_gb?: number;
  gpu_classes?: string[];
  fabrics?: string[];
  labels?: Record<string, string>;
  disk_free_gb?: number;
  unhealthy_gpus?: string[];
  agent_version?: string;
}

async function nodes(adminUrl: string): Promise<NodeView[]> {
  return (await (await fetch(`${adminUrl}/api/v1/nodes`, { headers: auth })).json()) as NodeView[];
}

function agentArgs(control: string, id: string, dir: string, extra: string[] = []): string[] {
  return [
    'agent',
    '--control',
    control,
    '--node-id',
    id,
    '--state-dir',
    join(dir, id),
    '--heartbeat-interval',
    '300ms',
    '--log-level',
    'warn',
    ...extra,
  ];
}

describe('agents and the inventory', () => {
  it('three simulated agents join and are reported truthfully; one killed goes stale, then lost', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-e2e-agents-'));
    const control = await startControl([
      '--store',
      `sqlite:${join(dir, 'db')}`,
      '--join-token',
      JOIN,
      '--admin-token',
      ADMIN,
      '--node-stale-after',
      '1s',
      '--node-lost-after',
      '3s',
      '--log-level',
      'warn',
    ]);
    const env = { LLMGW_JOIN_TOKEN: JOIN };
    startLlmgw(
      agentArgs(control.urls.agent, 'gpu-a', dir, [
        '--simulate',
        'gpus=8xh100-80gb,ram=2048g,disk=/data:3.5t:local',
        '--fabric',
        'ib0=10.1.0.5',
        '--labels',
        'pool=h100',
      ]),
      { env },
    );
    startLlmgw(
      agentArgs(control.urls.agent, 'gpu-b', dir, [
        '--simulate',
        'gpus=4xa100-80gb,ram=1024g,disk=/data:2t:local,disk=/models:20t:shared,bad=2',
      ]),
      { env },
    );
    const victim = startLlmgw(
      agentArgs(control.urls.agent, 'cpu-c', dir, ['--simulate', 'gpus=0,ram=64g,disk=/data:500g:local']),
      { env },
    );

    const all = await waitFor('three nodes up', async () => {
      const list = await nodes(control.urls.admin);
      return list.length === 3 && list.every((n) => n.liveness === 'up') ? list : undefined;
    });
    const byId = new Map(all.map((n) => [n.id, n]));
    expect(byId.get('gpu-a')).toMatchObject({
      state: 'ready',
      gpu_total: 8,
      gpu_free: 8,
      memory_gb: 2048,
      gpu_classes: ['h100-80gb'],
      fabrics: ['ib0'],
      labels: { pool: 'h100' },
      disk_free_gb: 3584,
    });
    const b = byId.get('gpu-b')!;
    expect(b.gpu_total).toBe(4);
    expect(b.gpu_free, 'the unhealthy GPU is not free').toBe(3);
    expect(b.unhealthy_gpus?.[0]).toMatch(/^gpu 2: /);
    expect(b.disk_free_gb, 'the shared /models filesystem is not counted as local disk').toBe(2048);
    expect(byId.get('cpu-c')).toMatchObject({ gpu_total: 0, memory_gb: 64 });
    expect(byId.get('cpu-c')!.agent_version).toMatch(/^\d+\.\d+\.\d+/);

    await victim.stop('SIGKILL');
    await waitFor('cpu-c stale', async () =>
      (await nodes(control.urls.admin)).find((n) => n.id === 'cpu-c')?.liveness === 'stale' ? true : undefined,
    );
    await waitFor('cpu-c lost', async () =>
      (await nodes(control.urls.admin)).find((n) => n.id === 'cpu-c')?.liveness === 'lost' ? true : undefined,
    );
    const summary = (await (await fetch(`${control.urls.admin}/api/v1/summary`, { headers: auth })).json()) as {
      nodes: { by_liveness: Record<string, number> };
      attention: string[];
    };
    expect(summary.nodes.by_liveness).toEqual({ up: 2, lost: 1 });
    expect(summary.attention.some((a) => a.startsWith('node cpu-c is lost'))).toBe(true);
    const others = await nodes(control.urls.admin);
    expect(
      others.filter((n) => n.id !== 'cpu-c').every((n) => n.liveness === 'up'),
      'the live agents stay up',
    ).toBe(true);
  });

  it('refuses a wrong join token: the agent exits with a reason and the secret is logged nowhere', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-e2e-badjoin-'));
    const control = await startControl(['--store', 'none', '--join-token', JOIN, '--log-level', 'info']);
    const wrong = 'not-the-join-token-zzzzzzzzzzzzz';
    const agent = startLlmgw(agentArgs(control.urls.agent, 'intruder', dir, ['--join-token', wrong]));
    const { code } = await agent.exited;
    expect(code).not.toBe(0);
    expect(agent.stderr()).toContain('the join token is wrong');
    await control.waitForLog((e) => e.msg === 'join refused: wrong join token');
    expect(control.lines.join('\n')).not.toContain(wrong);
    expect(control.lines.join('\n')).not.toContain(JOIN);
    expect(await nodes(control.urls.admin)).toEqual([]);
  });

  it('keeps a cordon across a control-plane restart, known from the store before any heartbeat', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-e2e-cordon-'));
    const args = [
      '--store',
      `sqlite:${join(dir, 'db')}`,
      '--join-token',
      JOIN,
      '--admin-token',
      ADMIN,
      '--log-level',
      'warn',
    ];
    const first = await startControl(args);
    startLlmgw(
      agentArgs(first.urls.agent, 'n1', dir, ['--simulate', 'gpus=2xl40s-48gb,ram=256g', '--join-token', JOIN]),
    );
    await waitFor('n1 joined', async () => ((await nodes(first.urls.admin)).length === 1 ? true : undefined));
    const res = await fetch(`${first.urls.admin}/api/v1/nodes/n1/state`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json', 'x-llmgw-actor': 'ops' },
      body: JSON.stringify({ state: 'cordon' }),
    });
    expect(await res.json()).toEqual({ id: 'n1', state: 'cordoned' });
    await first.stop();

    // Same addresses are not needed: the restarted control plane knows n1 from the store before it reports.
    const second = await startControl(args);
    const remembered = await nodes(second.urls.admin);
    expect(remembered.map((n) => [n.id, n.state])).toEqual([['n1', 'cordoned']]);
  });

  it("accepts an older agent's report: unknown fields ignored, missing ones unknown", async () => {
    const control = await startControl([
      '--store',
      'none',
      '--join-token',
      JOIN,
      '--admin-token',
      ADMIN,
      '--log-level',
      'warn',
    ]);
    const joined = await fetch(`${control.urls.agent}/agent/v1/join`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        join_token: JOIN,
        node_id: 'old-node',
        agent_version: '0.0.9',
        protocol_version: 0,
        legacy: 'x',
      }),
    });
    expect(joined.status).toBe(200);
    const { credential } = (await joined.json()) as { credential: string };
    const recorded = readFileSync(new URL('../fixtures/older-agent-heartbeat.json', import.meta.url), 'utf8');
    const beat = await fetch(`${control.urls.agent}/agent/v1/heartbeat`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${credential}` },
      body: recorded,
    });
    expect(beat.status, await beat.clone().text()).toBe(200);
    expect(((await beat.json()) as { shards: unknown[] }).shards).toEqual([]);
    const [node] = await nodes(control.urls.admin);
    expect(node).toMatchObject({
      id: 'old-node',
      gpu_total: 1,
      gpu_free: 1,
      gpu_classes: ['a100-80gb'],
      memory_gb: 64,
      agent_version: '0.0.9',
    });
    expect(node!.disk_free_gb, 'no disks reported reads as unknown (absent), not as a full disk').toBeUndefined();

    const forged = await fetch(`${control.urls.agent}/agent/v1/heartbeat`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer forged-credential' },
      body: recorded,
    });
    expect(forged.status).toBe(401);
  });
});
