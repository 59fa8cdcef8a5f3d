// The router with a model at its declared capacity, end to end on loopback:
// requests past capacity wait in the fair-share queue instead of reaching
// the engine, a trickling team is served before a flooding team's backlog,
// interactive before batch, and the refusals say which limit. The engine is
// a stand-in that answers only when the test lets it, so the order requests
// reach it is the order the queue let them through, whatever the machine's
// speed; with capacity.per_replica 1 and one replica, one at a time.
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanups, closeAll, listen, model, replica, caught } from '../../../test/support/gateway-router.js';
import { waitFor } from '../../../test/support/wait.js';
import { hashKey, type ApiKeyRecord, type PriorityClass } from '../ports/index.js';
import type { Registry } from 'prom-client';

afterEach(closeAll);

async function queued(registry: Registry, name: string): Promise<number> {
  const metric = await registry.getSingleMetric('llmgw_router_queued_requests')!.get();
  return metric.values.find((v) => v.labels.model === name)?.value ?? 0;
}

/** An engine that holds every chat request until release(): `seen` is the prompts in the order they arrived. */
async function heldEngine() {
  const seen: string[] = [];
  const held: ServerResponse[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const parsed = JSON.parse(body) as { messages: { content: string }[] };
      seen.push(parsed.messages.at(-1)!.content);
      held.push(res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => {
    for (const r of held) r.destroy();
    server.closeAllConnections();
    return new Promise((resolve) => server.close(resolve));
  });
  const answer = (res: ServerResponse) =>
    res.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify({
        id: 'chatcmpl-held',
        object: 'chat.completion',
        created: 0,
        model: 'alpha',
        choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
      }),
    );
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    /** Answers the oldest request still held. */
    release: () => answer(held.shift()!),
    held: () => held.length,
  };
}

let n = 0;
function key(team: string, priority?: PriorityClass): { record: ApiKeyRecord; secret: string } {
  const secret = `sk-llmgw-test-${team}-${n++}`;
  const record: ApiKeyRecord = {
    id: `key_${team}_${n}`,
    name: team,
    prefix: secret.slice(0, 12),
    hash: hashKey(secret),
    allowedModels: null,
    requestsPerMinute: null,
    tokensPerMinute: null,
    expiresAtMs: null,
    createdAtMs: Date.now(),
    createdBy: 'test',
    revokedAtMs: null,
    team,
    ...(priority ? { priority } : {}),
  };
  return { record, secret };
}

async function setup(capacity: { per_replica: number; queue_timeout?: string; queue_per_team?: number }) {
  const m = model({ name: 'alpha', capacity });
  const engine = await heldEngine();
  const l = await listen([m], {}, { alpha: [replica('r0', engine.url)] });
  const client = (k: { record: ApiKeyRecord; secret: string }) => {
    l.keys.create(k.record);
    return new OpenAI({ apiKey: k.secret, baseURL: `${l.url}/v1`, maxRetries: 0, timeout: 30_000 });
  };
  const waiting = (count: number) =>
    waitFor(`${count} requests waiting in the queue`, async () => (await queued(l.registry, 'alpha')) === count);
  const reached = (count: number) => waitFor(`${count} requests at the engine`, () => engine.seen.length === count);
  return { ...l, engine, client, waiting, reached };
}

const ask = (c: OpenAI, content: string, headers?: Record<string, string>) =>
  c.chat.completions.create({ model: 'alpha', messages: [{ role: 'user', content }] }, headers ? { headers } : {});

/** Answers held requests one at a time, each after the next has reached the engine, until `total` were answered. */
async function serveAll(h: Awaited<ReturnType<typeof setup>>, total: number): Promise<void> {
  for (let i = 1; i <= total; i++) {
    await h.reached(i);
    h.engine.release();
  }
}

describe('fair share at a saturated model', () => {
  it("holds requests past capacity in the gateway, and serves a trickling team before a flooding team's backlog", async () => {
    const h = await setup({ per_replica: 1 });
    const a = h.client(key('flood'));
    const b = h.client(key('trickle'));
    const all = [ask(a, 'a1')];
    await h.reached(1);
    for (const id of ['a2', 'a3', 'a4', 'a5']) all.push(ask(a, id));
    await h.waiting(4);
    expect(h.engine.held(), 'the engine holds only what fits the capacity').toBe(1);
    all.push(ask(b, 'b1'));
    await h.waiting(5);
    await serveAll(h, 6);
    await Promise.all(all);
    // Without fair share b1 would be last, behind all of A's backlog (FIFO).
    expect(h.engine.seen).toEqual(['a1', 'b1', 'a2', 'a3', 'a4', 'a5']);
  });

  it('serves every waiting interactive request before a batch one, and a header can only lower a class', async () => {
    const h = await setup({ per_replica: 1 });
    const batchKey = h.client(key('bulk', 'batch'));
    const app = h.client(key('app'));
    const all = [ask(app, 'first')];
    await h.reached(1);
    all.push(ask(batchKey, 'batch-key'));
    await h.waiting(1);
    all.push(ask(app, 'lowered', { 'x-llmgw-priority': 'batch' }));
    await h.waiting(2);
    all.push(ask(batchKey, 'raised-ignored', { 'x-llmgw-priority': 'interactive' }));
    await h.waiting(3);
    all.push(ask(app, 'interactive'));
    await h.waiting(4);
    await serveAll(h, 5);
    await Promise.all(all);
    expect(h.engine.seen[1], 'the one interactive request waiting goes before every batch one').toBe('interactive');
    expect(h.engine.seen.slice(2).sort()).toEqual(['batch-key', 'lowered', 'raised-ignored']);
  });

  it("refuses a team past its share of the queue with 429 and leaves other teams' places", async () => {
    const h = await setup({ per_replica: 1, queue_per_team: 2 });
    const a = h.client(key('flood'));
    const b = h.client(key('other'));
    const running = ask(a, 'a1');
    await h.reached(1);
    const waiting = [ask(a, 'a2'), ask(a, 'a3')];
    await h.waiting(2);
    const refused = await caught(ask(a, 'a4'));
    expect(refused.status).toBe(429);
    expect(refused.headers?.get('retry-after')).toBe('1');
    expect(refused.message).toMatch(/team flood already has 2 requests waiting .*capacity\.queue_per_team/);
    expect((refused.error as { code?: string }).code).toBe('rate_limit_exceeded');
    const other = ask(b, 'b1');
    await h.waiting(3);
    await serveAll(h, 4);
    await expect(other, "another team's request still gets its place").resolves.toBeTruthy();
    await Promise.all([running, ...waiting]);
  });

  it('gives up after queue_timeout with a 503 that says the fleet is saturated', async () => {
    const h = await setup({ per_replica: 1, queue_timeout: '200ms' });
    const a = h.client(key('x'));
    const first = ask(a, 'held');
    await h.reached(1);
    const late = await caught(ask(a, 'late'));
    expect(late.status).toBe(503);
    expect(late.headers?.get('retry-after')).toBe('5');
    expect(late.message).toMatch(
      /is at capacity \(1 replica × capacity\.per_replica 1\): this interactive request waited \d+ ms/,
    );
    expect(await queued(h.registry, 'alpha'), 'it left the queue').toBe(0);
    h.engine.release();
    await first;
    expect(h.engine.seen, 'the refused request never reached the engine').toEqual(['held']);
  });

  it('refuses a priority header that names no class, gated model or not', async () => {
    const h = await setup({ per_replica: 4 });
    const err = await caught(ask(h.client(key('t')), 'x', { 'x-llmgw-priority': 'urgent' }));
    expect(err.status).toBe(400);
    expect(err.message).toMatch(/x-llmgw-priority must be one of interactive, batch/);
  });
});
