// Keep-alive heartbeats against a real control plane process: an agent sends
// its full report once and then only the report's hash, yet a GPU that goes
// bad is still seen; an older agent that sends its full report every time
// still works; and a restarted control plane, which holds no hash, makes the
// agent send its full report again. The failure this guards against: a
// keep-alive that hides a change (a node placed on with a broken GPU) or an
// agent that never re-sends its report to a control plane that lost it.
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { Agent, compileAgentOptions } from '../../src/agent/index.js';
import type { NodeReport } from '../../src/protocol/index.js';
import { freePort, startControl, stopAll } from '../support/processes.js';
import { waitFor } from '../support/wait.js';

const JOIN = 'e2e-keepalive-join-token-0123456789';
const ADMIN = 'e2e-keepalive-admin-token-0123456789';
const auth = { authorization: `Bearer ${ADMIN}` };
const agents: Agent[] = [];

afterAll(async () => {
  await Promise.all(agents.map((a) => a.stop()));
  await stopAll();
});

interface NodeView {
  id: string;
  liveness: string;
  gpu_total: number;
  gpu_free: number;
  unhealthy_gpus?: string[];
}

async function node(adminUrl: string, id: string): Promise<NodeView | undefined> {
  const list = (await (await fetch(`${adminUrl}/api/v1/nodes`, { headers: auth })).json()) as NodeView[];
  return list.find((n) => n.id === id);
}

/** The heartbeat counters of a control plane's /metrics. */
async function counters(adminUrl: string): Promise<{ full: number; keepalive: number; asked: number }> {
  const text = await (await fetch(`${adminUrl}/metrics`, { headers: auth })).text();
  const read = (re: RegExp) => Number(re.exec(text)?.[1] ?? NaN);
  return {
    full: read(/^llmgw_heartbeat_reports_total\{kind="full"\} (\d+)/m),
    keepalive: read(/^llmgw_heartbeat_reports_total\{kind="keepalive"\} (\d+)/m),
    asked: read(/^llmgw_heartbeat_report_requests_total (\d+)/m),
  };
}

function gpuReport(problems: string[][]): NodeReport {
  return {
    hostname: 'ka-1',
    memory_total_bytes: 64 * 2 ** 30,
    gpus: problems.map((p, index) => ({
      index,
      uuid: `GPU-${index}`,
      class: 'h100-80gb',
      memory_total_mib: 81559,
      problems: p,
    })),
    engines: [{ name: 'sim' }],
  };
}

describe('keep-alive heartbeats', () => {
  it('carry only the hash, yet a changed GPU is seen, an older agent still works, and a restart brings the report back', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-e2e-keepalive-'));
    const agentPort = await freePort();
    // A stale window of 3 s: the control plane asks a heartbeat a second.
    const controlArgs = [
      '--store',
      `sqlite:${join(dir, 'db')}`,
      '--join-token',
      JOIN,
      '--admin-token',
      ADMIN,
      '--node-stale-after',
      '3s',
      '--node-lost-after',
      '30s',
      '--log-level',
      'warn',
    ];
    const args = () => [...controlArgs, '--agent-addr', `127.0.0.1:${agentPort}`];
    let control = await startControl(args());
    // startControl binds the agent listener on port 0 first; the last --agent-addr given wins.
    expect(control.urls.agent).toBe(`http://127.0.0.1:${agentPort}`);

    let report = gpuReport([[], [], [], []]);
    const agent = new Agent(
      compileAgentOptions({
        control: [control.urls.agent],
        joinToken: JOIN,
        nodeId: 'ka-1',
        stateDir: join(dir, 'ka-1'),
        heartbeatInterval: '1s',
      }),
      { probe: async () => report, logger: pino({ level: 'silent' }), mgmt: false },
    );
    agents.push(agent);
    await agent.start();
    await waitFor('ka-1 up with 4 GPUs', async () => {
      const n = await node(control.urls.admin, 'ka-1');
      return n?.liveness === 'up' && n.gpu_total === 4 ? n : undefined;
    });
    const idle = await waitFor(
      'several keep-alives',
      async () => {
        const c = await counters(control.urls.admin);
        return c.keepalive >= 3 ? c : undefined;
      },
      30_000,
    );
    expect(
      idle.full,
      `an unchanged report is sent once, not at every heartbeat (${JSON.stringify(idle)})`,
    ).toBeLessThanOrEqual(2);

    report = gpuReport([[], ['uncorrected ECC errors'], [], []]);
    const seen = await waitFor(
      'the bad GPU seen through keep-alives',
      async () => {
        const n = await node(control.urls.admin, 'ka-1');
        return n?.gpu_free === 3 ? n : undefined;
      },
      30_000,
    );
    expect(seen.unhealthy_gpus?.[0]).toMatch(/^gpu 1: /);

    // An older agent: no hash, its full report every time, fields this control plane does not know.
    const fixture = JSON.parse(
      readFileSync(new URL('../fixtures/older-agent-heartbeat.json', import.meta.url), 'utf8'),
    ) as Record<string, unknown>;
    const joined = await fetch(`${control.urls.agent}/agent/v1/join`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ join_token: JOIN, node_id: 'old-node', agent_version: '0.0.9', protocol_version: 0 }),
    });
    expect(joined.status, await joined.clone().text()).toBe(200);
    const { credential } = (await joined.json()) as { credential: string };
    for (let i = 0; i < 2; i++) {
      const res = await fetch(`${control.urls.agent}/agent/v1/heartbeat`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${credential}` },
        body: JSON.stringify(fixture),
      });
      const answer = (await res.json()) as { send_report?: boolean };
      expect(res.status).toBe(200);
      expect(answer.send_report, 'an agent that sends its report is never asked for it').toBeUndefined();
    }
    expect(await node(control.urls.admin, 'old-node')).toMatchObject({ liveness: 'up', gpu_total: 1 });

    // A restart: the new process holds the stored report but no hash, so it asks, and the agent sends it again.
    await control.stop('SIGTERM');
    control = await startControl(args());
    const after = await waitFor(
      'the agent asked for its report, and sending it',
      async () => {
        const c = await counters(control.urls.admin);
        return c.asked >= 1 && c.full >= 1 && c.keepalive >= 2 ? c : undefined;
      },
      30_000,
    );
    expect(
      after.full,
      `one full report after the restart, then keep-alives again (${JSON.stringify(after)})`,
    ).toBeLessThanOrEqual(2);
    const back = await waitFor('ka-1 up again', async () => {
      const n = await node(control.urls.admin, 'ka-1');
      return n?.liveness === 'up' ? n : undefined;
    });
    expect(back.gpu_free, 'the bad GPU is still known after the restart').toBe(3);
  });
});
