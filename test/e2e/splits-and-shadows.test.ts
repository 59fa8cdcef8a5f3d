// Splits and shadows as an operator meets them (issue 38): a real `llmgw
// control`, a simulated agent, real sim engines. A 90/10 split holds within
// 3 points over 2,000 requests, counted by the engines that served them and
// by usage (an independent random draw per request once let the share wander
// by chance; unkeyed requests are now placed evenly, within a few requests); a
// shadow whose candidate never answers in time leaves the client's answers
// exactly as without it and never waits on it; `ctl shadows` shows the
// comparison.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ModelView, ReplicaView, RequestsView, ShadowsView, UsageView } from '../../src/api/index.js';
import { startOneNodeFleet, type OneNodeFleet } from '../support/one-node.js';
import { waitFor } from '../support/wait.js';
import { runCtlCli } from './ctl-support.js';

let fleet: OneNodeFleet;
let key = '';

const sim = (args: string[] = []) => [{ engine: 'sim', args }];

beforeAll(async () => {
  fleet = await startOneNodeFleet({
    name: 'splits',
    portRange: '27300-27399',
    keys: ['client'],
    models: (dir) => {
      const source = `file://${dir}`;
      return [
        { name: 'chat-canary', source, scaling: { min: 1 }, profiles: sim() },
        {
          name: 'chat',
          source,
          scaling: { min: 1 },
          profiles: sim(),
          split: [
            { model: 'chat', weight: 90 },
            { model: 'chat-canary', weight: 10 },
          ],
        },
        // Its first byte would come after ten minutes: every copy is still running when the test ends.
        { name: 'candidate', source, scaling: { min: 1 }, profiles: sim(['--ttft-ms', '600000']) },
        // The same engine twice, one shadowed and one not: the no-shadow run to compare answers with.
        { name: 'plain', source, scaling: { min: 1 }, profiles: sim(['--seed', '7']) },
        {
          name: 'shadowed',
          source,
          scaling: { min: 1 },
          profiles: sim(['--seed', '7']),
          shadow: { model: 'candidate', share: 1, max_concurrent: 3, timeout: '20m' },
        },
      ];
    },
  });
  key = fleet.keys.client!.secret;
}, 180_000);

afterAll(async () => {
  await fleet?.stop();
});

async function chat(model: string, body: Record<string, unknown> = {}): Promise<{ status: number; text: string }> {
  const res = await fetch(`${fleet.clientUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'say something' }], max_tokens: 1, ...body }),
  });
  return { status: res.status, text: await res.text() };
}

/** The generation tokens a sim engine counted, read from its /metrics: one per request at max_tokens 1. */
async function generated(model: string): Promise<number> {
  const { body } = await fleet.api<ReplicaView[]>('GET', `/api/v1/replicas?model=${model}`);
  let sum = 0;
  for (const r of body.filter((x) => x.state === 'ready')) {
    const text = await (await fetch(`${r.endpoint}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith('vllm:generation_tokens_total'));
    sum += Number(line?.split(' ').pop() ?? 0);
  }
  return sum;
}

describe('a 90/10 split between a model and its canary', () => {
  it('sends 10% ± 3 points of 2,000 requests to the canary, counted by the engines, and says so in the request log', async () => {
    const before = { chat: await generated('chat'), canary: await generated('chat-canary') };
    const total = 2000;
    const answeredBy = new Map<string, number>();
    let next = 0;
    // Sixteen clients at a time: enough to be quick, few enough for a loaded machine.
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < total) {
          next++;
          const { status, text } = await chat('chat');
          expect(status, text).toBe(200);
          const served = (JSON.parse(text) as { model: string }).model;
          answeredBy.set(served, (answeredBy.get(served) ?? 0) + 1);
        }
      }),
    );
    const byEngine = {
      chat: (await generated('chat')) - before.chat,
      canary: (await generated('chat-canary')) - before.canary,
    };
    expect(byEngine.chat + byEngine.canary, 'every request reached one of the two engines').toBe(total);
    const share = byEngine.canary / total;
    expect(share, `the canary served ${byEngine.canary} of ${total}`).toBeGreaterThanOrEqual(0.07);
    expect(share).toBeLessThanOrEqual(0.13);
    // Placed evenly, the count is within a few requests of 200, every run (draws.test.ts bounds it at 3).
    expect(Math.abs(byEngine.canary - total / 10), `the canary served ${byEngine.canary}`).toBeLessThanOrEqual(3);
    // Usage, as billed: counted per model that served, once the gateway's counts are flushed to the store.
    const usage = await waitFor('usage of all 2,000 requests', async () => {
      const { body } = await fleet.api<UsageView[]>('GET', '/api/v1/usage');
      const of = (m: string) => body.filter((u) => u.model === m).reduce((n, u) => n + u.requests, 0);
      const counted = { chat: of('chat'), canary: of('chat-canary') };
      return counted.chat + counted.canary === total ? counted : undefined;
    });
    expect(usage, 'usage counts each request against the model that served it').toEqual(byEngine);
    // The answer names the model that served it, as for a fallback.
    expect(answeredBy.get('chat-canary'), 'answers naming the canary match the canary engine').toBe(byEngine.canary);
    expect(answeredBy.get('chat')).toBe(byEngine.chat);

    const { body: log } = await fleet.api<RequestsView>('GET', '/api/v1/requests?limit=200');
    const rules = new Set(log.requests.map((r) => r.rule));
    expect(rules, 'each record names the split and where it sent the request').toEqual(
      new Set(['split 90/10 → chat', 'split 90/10 → chat-canary']),
    );
  }, 600_000);

  it('lists the split in the model views', async () => {
    const { body } = await fleet.api<ModelView[]>('GET', '/api/v1/models');
    const chatView = body.find((m) => m.name === 'chat')!;
    expect(chatView.split).toEqual([
      { model: 'chat', weight: 90 },
      { model: 'chat-canary', weight: 10 },
    ]);
    expect(chatView.split_by).toBe('request');
    expect(body.find((m) => m.name === 'chat-canary')!.split, 'a model without a split has none').toBeUndefined();
  });
});

describe('a shadow whose candidate never answers in time', () => {
  /** The answer with what differs between any two answers of a sim (its id, the second it was made) and the model's name masked. */
  const masked = (text: string, model: string) =>
    text
      .replace(/"id":"[^"]+"/g, '"id":"ID"')
      .replace(/"created":\d+/g, '"created":0')
      .replaceAll(`"model":"${model}"`, '"model":"M"');

  it('answers byte for byte as without the shadow, every answer while the copies are still running', async () => {
    const prompts = ['one', 'two', 'three', 'four', 'five', 'six'];
    const ask = (model: string, content: string, stream: boolean) =>
      chat(model, { messages: [{ role: 'user', content }], max_tokens: 12, stream });
    const baseline: string[] = [];
    for (const p of prompts) for (const stream of [false, true]) baseline.push((await ask('plain', p, stream)).text);

    const shadowedAnswers: string[] = [];
    for (const p of prompts) {
      for (const stream of [false, true]) {
        const { status, text } = await ask('shadowed', p, stream);
        expect(status, text).toBe(200);
        shadowedAnswers.push(text);
      }
    }
    // Read after every answer is in: no copy has ended, so none was waited for.
    const { body: view } = await fleet.api<ShadowsView>('GET', '/api/v1/shadows');
    const row = view.shadows.find((s) => s.model === 'shadowed')!;
    expect(row.shadow.requests, 'no copy has ended: the answers above did not wait for one').toBe(0);
    expect(row.in_flight, 'the copies are running on the candidate, up to its budget of 3').toBe(3);
    expect(row.copied).toBe(3);
    expect(row.dropped.busy, 'past its budget a copy is dropped, not queued').toBe(prompts.length * 2 - 3);
    expect(row.primary.requests, 'both sides are over the copied requests only').toBe(3);
    expect(row.primary.completion_tokens, "the primary side counts the answers' tokens").toBeGreaterThan(0);

    expect(shadowedAnswers.map((t) => masked(t, 'shadowed'))).toEqual(baseline.map((t) => masked(t, 'plain')));
  }, 120_000);

  it('shows the comparison on the dashboard and through ctl shadows', async () => {
    // The dashboard's page renders the same view as ctl.
    const page = await fetch(`${fleet.adminUrl}/shadows`, { headers: { authorization: `Bearer ${fleet.adminToken}` } });
    const html = await page.text();
    expect(page.status, html.slice(0, 300)).toBe(200);
    expect(html).toContain('data-shadow="shadowed" data-side="primary"');
    expect(html).toMatch(/<td data-field="requests">3<\/td>/);

    const env = { LLMGW_ADMIN_URL: fleet.adminUrl, LLMGW_ADMIN_TOKEN: fleet.adminToken };
    const ctl = await runCtlCli(['shadows'], { env, timeoutMs: 120_000 });
    expect(ctl.code, ctl.stderr).toBe(0);
    // The table's rows, cell by cell (ctl draws its tables with box characters).
    const rows = ctl.stdout
      .split('\n')
      .filter((l) => l.startsWith('│'))
      .map((l) =>
        l
          .split('│')
          .slice(1, -1)
          .map((c) => c.trim()),
      );
    const header = rows[0]!;
    const cell = (row: string[], name: string) => row[header.indexOf(name)];
    const primary = rows.find((r) => r[0] === 'shadowed');
    expect(primary, ctl.stdout).toBeDefined();
    expect([cell(primary!, 'CANDIDATE'), cell(primary!, 'SHARE'), cell(primary!, 'SIDE')]).toEqual([
      'candidate',
      '100%',
      'primary',
    ]);
    expect([cell(primary!, 'REQUESTS'), cell(primary!, 'ERRORS'), cell(primary!, 'NOT SENT')]).toEqual([
      '3',
      '0',
      '9 busy',
    ]);
    expect(cell(primary!, 'TTFT P50/P95'), 'the primary side has latency').toMatch(/^\d+\/\d+ ms$/);
    const shadowRow = rows[rows.indexOf(primary!) + 1]!;
    expect([cell(shadowRow, 'SIDE'), cell(shadowRow, 'REQUESTS'), cell(shadowRow, 'NOT SENT')]).toEqual([
      'shadow',
      '0',
      '3 running',
    ]);

    const json = await runCtlCli(['shadows', '-o', 'json'], { env, timeoutMs: 120_000 });
    const parsed = JSON.parse(json.stdout) as ShadowsView;
    expect(parsed.shadows.map((s) => [s.model, s.candidate, s.share])).toEqual([['shadowed', 'candidate', 1]]);

    const model = await runCtlCli(['model', 'shadowed'], { env, timeoutMs: 120_000 });
    expect(model.stdout).toContain('shadow     candidate 100%');
  }, 300_000);
});
