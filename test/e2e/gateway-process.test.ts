// `llmgw gateway --workers 2` as an operator runs it beside `llmgw control`:
// its own port, the same store (Postgres when LLMGW_TEST_POSTGRES names a
// server, else a SQLite file: the two ways a gateway follows, by change
// notices or by polling), and no admin or agent listener. A chat completion through it with the official
// openai client and an issued key succeeds; a key revoked on the control
// plane is refused by every worker once the gateway has reloaded the keys;
// both workers take connections (their metrics name each pid with what it
// answered); and killing one worker by its pid leaves the gateway answering
// while the primary starts another.
import { readFileSync } from 'node:fs';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { weightsDir } from '../support/fleet.js';
import { createTestDatabase, POSTGRES_URL, type TestDatabase } from '../support/postgres.js';
import { startOneNodeFleet, type OneNodeFleet } from '../support/one-node.js';
import { startLlmgw, type RunningProcess } from '../support/processes.js';
import { waitFor } from '../support/wait.js';

let fleet: OneNodeFleet;
let gateway: RunningProcess;
let clientUrl = '';
let metricsUrl = '';
let workers: number[] = [];
let db: TestDatabase | undefined;

beforeAll(async () => {
  if (POSTGRES_URL) db = await createTestDatabase();
  fleet = await startOneNodeFleet({
    name: 'gateway',
    ...(db ? { store: db.url } : {}),
    portRange: '23300-23349',
    keys: ['gw', 'revoked'],
    models: (dir) => [
      {
        name: 'chat',
        source: weightsDir(dir),
        scaling: { min: 1 },
        profiles: [{ engine: 'sim' }],
      },
    ],
  });
  gateway = startLlmgw([
    'gateway',
    '--store',
    fleet.store,
    '--client-addr',
    '127.0.0.1:0',
    '--metrics-addr',
    '127.0.0.1:0',
    '--workers',
    '2',
    // info: the test waits for the primary's line that a worker was started again.
    '--log-level',
    'info',
  ]);
  const listening = await gateway.waitForLog((e) => e.msg === 'llmgw gateway listening', 60_000);
  clientUrl = listening.client as string;
  metricsUrl = listening.metrics as string;
  workers = listening.workers as number[];
}, 180_000);

afterAll(async () => {
  await fleet?.stop();
  await db?.drop();
});

/** A chat completion on a connection of its own (the primary hands each new connection to the next worker); resolves with the status. */
async function chatOnce(secret: string): Promise<number> {
  const res = await fetch(`${clientUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', connection: 'close' },
    body: JSON.stringify({ model: 'chat', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }),
  });
  await res.arrayBuffer();
  return res.status;
}

/** Requests each worker has answered, by pid, from the primary's /metrics (every worker's, summed). */
async function answeredByPid(): Promise<Map<number, number>> {
  const text = await (await fetch(`${metricsUrl}/metrics`)).text();
  const out = new Map<number, number>();
  for (const m of text.matchAll(/^llmgw_gateway_worker_requests\{pid="(\d+)"\} (\d+)$/gm))
    out.set(Number(m[1]), Number(m[2]));
  return out;
}

describe(`llmgw gateway --workers 2 beside a control plane on ${POSTGRES_URL ? 'Postgres' : 'SQLite'}`, () => {
  it('serves a chat completion to the openai client with an issued key', async () => {
    expect(workers, 'the listening line names both workers').toHaveLength(2);
    expect(clientUrl).not.toBe(fleet.clientUrl);
    const openai = new OpenAI({ baseURL: `${clientUrl}/v1`, apiKey: fleet.keys.gw!.secret, maxRetries: 0 });
    const answer = await openai.chat.completions.create({
      model: 'chat',
      messages: [{ role: 'user', content: 'Say something.' }],
      max_tokens: 8,
    });
    expect(answer.choices[0]?.message.content, JSON.stringify(answer)).toEqual(expect.any(String));
    expect(answer.usage?.completion_tokens).toBeGreaterThan(0);
  });

  it("starts each worker with the gateway's young generation, and no other process with it", () => {
    const argv = (pid: number) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    for (const pid of workers) expect(argv(pid), `worker ${pid}`).toContain('--max-semi-space-size=64');
    expect(argv(gateway.child.pid!), 'the primary forwards connections only').not.toContain('--max-semi-space-size=64');
  });

  it('spreads connections over both workers', async () => {
    const secret = fleet.keys.gw!.secret;
    const answered = await waitFor('both workers answered a chat completion', async () => {
      expect(await chatOnce(secret)).toBe(200);
      const byPid = await answeredByPid();
      return workers.every((pid) => (byPid.get(pid) ?? 0) > 0) ? byPid : undefined;
    });
    expect([...answered.keys()].sort()).toEqual([...workers].sort());
  });

  it('refuses a key revoked on the control plane, in every worker', async () => {
    const { id, secret } = fleet.keys.revoked!;
    expect(await chatOnce(secret), 'the key works through the gateway before it is revoked').toBe(200);
    const revoked = await fleet.api('DELETE', `/api/v1/keys/${id}`);
    expect(revoked.status).toBe(200);
    // Each request on a new connection goes to the next worker: four in a row refused covers both.
    await waitFor('four requests in a row refused with 401', async () => {
      for (let i = 0; i < 4; i++) if ((await chatOnce(secret)) !== 401) return undefined;
      return true;
    });
    const openai = new OpenAI({ baseURL: `${clientUrl}/v1`, apiKey: secret, maxRetries: 0 });
    await expect(
      openai.chat.completions.create({ model: 'chat', messages: [{ role: 'user', content: 'hi' }] }),
    ).rejects.toMatchObject({ status: 401 });
  });

  it('keeps answering when a worker is killed, and starts another', async () => {
    const secret = fleet.keys.gw!.secret;
    const [victim, survivor] = workers as [number, number];
    process.kill(victim, 'SIGKILL');
    await gateway.waitForLog((e) => e.msg === 'a gateway worker exited; starting another' && e.pid === victim);
    for (let i = 0; i < 4; i++) expect(await chatOnce(secret), `request ${i} after the kill`).toBe(200);
    const replacement = await gateway.waitForLog((e) => e.msg === 'gateway worker started again', 60_000);
    expect(replacement.pid).not.toBe(victim);
    const byPid = await waitFor('the new worker in the metrics', async () => {
      const m = await answeredByPid();
      return m.has(replacement.pid as number) ? m : undefined;
    });
    expect(byPid.has(victim), 'the killed worker is gone from the metrics').toBe(false);
    expect(byPid.has(survivor)).toBe(true);
  });
});
