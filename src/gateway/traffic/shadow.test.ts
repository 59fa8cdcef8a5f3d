import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { Pool } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import type { RoutedModel } from '../ports/index.js';
import { ShadowBoard } from './board.js';
import { ShadowRunner, shadowPlan, usageOf, type ShadowCopy } from './shadow.js';

const base = (name: string, over: Partial<RoutedModel> = {}): RoutedModel => ({
  name,
  aliases: [],
  fallbacks: [],
  routing: 'least-load',
  fallbackWhileCold: false,
  endpoints: ['chat'],
  limits: { contextTokens: null, maxTokens: null, maxN: null },
  ...over,
});

const primary = base('chat', { shadow: { model: 'cand', share: 1, maxConcurrent: 2, timeoutMs: 60_000 } });
const cand = base('cand');

const servers: Server[] = [];
const pools: Pool[] = [];
afterEach(async () => {
  await Promise.all(pools.splice(0).map((p) => p.destroy()));
  for (const s of servers.splice(0)) s.closeAllConnections();
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
});

/** An engine that records what it is sent and answers when `release` is called (never, unless called). */
async function engine(): Promise<{
  pool: Pool;
  bodies: Record<string, unknown>[];
  heard: IncomingMessage[];
  release: () => void;
}> {
  const bodies: Record<string, unknown>[] = [];
  const heard: IncomingMessage[] = [];
  const waiting: (() => void)[] = [];
  let released = false;
  const server = createServer((req, res) => {
    let text = '';
    req.on('data', (c: Buffer) => (text += c.toString()));
    req.on('end', () => {
      bodies.push(JSON.parse(text) as Record<string, unknown>);
      heard.push(req);
      const answer = () => res.end(JSON.stringify({ choices: [], usage: { prompt_tokens: 7, completion_tokens: 3 } }));
      if (released) answer();
      else waiting.push(answer);
    });
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const pool = new Pool(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  pools.push(pool);
  return {
    pool,
    bodies,
    heard,
    release: () => {
      released = true;
      for (const w of waiting.splice(0)) w();
    },
  };
}

function runner(board: ShadowBoard): ShadowRunner {
  return new ShadowRunner({
    resolve: (n) => (n === 'cand' ? cand : n === 'chat' ? primary : undefined),
    serves: (_m, endpoint) => endpoint === 'chat',
    board,
    logger: pino({ level: 'silent' }),
  });
}

const copyTo = (pool: Pool | null, id: string, stream = false): ShadowCopy => ({
  id,
  path: '/v1/chat/completions',
  body: { model: 'chat', messages: [{ role: 'user', content: 'hi' }], stream },
  stream,
  pick: () =>
    pool ? { replica: { id: 'r1', endpoint: 'x', draining: false }, upstream: { pool, basePath: '' } } : null,
});

const until = async (what: string, check: () => boolean) => {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
  expect(check(), what).toBe(true);
};

describe('the shadow runner', () => {
  it('sends the copy with the candidate name after the launch returns, drops past its budget, and compares both sides', async () => {
    const e = await engine();
    const board = new ShadowBoard(new Registry());
    const r = runner(board);
    const plans = ['a', 'b', 'c'].map(() => shadowPlan(primary, 'chat')!);
    plans.forEach((p, i) => r.launch(p, copyTo(e.pool, `req-${i}`)));
    // Nothing is sent on the launching turn: the client's own send goes first.
    expect(e.bodies.length).toBe(0);
    await until('two copies reach the candidate', () => e.bodies.length === 2);
    expect(e.bodies[0]).toMatchObject({ model: 'cand', messages: [{ role: 'user', content: 'hi' }] });
    expect(e.heard[0]!.headers['x-request-id']).toBe('req-0-shadow');
    let [view] = board.views(() => 1);
    expect(view).toMatchObject({ copied: 2, in_flight: 2, dropped: { busy: 1, no_replica: 0, not_served: 0 } });

    for (const p of plans)
      r.primaryEnded(p, performance.now(), 200, { ttftMs: 1, promptTokens: 7, completionTokens: 4 });
    e.release();
    await until('both copies end', () => board.views(() => 1)[0]!.shadow.requests === 2);
    [view] = board.views(() => 1);
    expect(view!.primary).toMatchObject({ requests: 2, errors: 0, prompt_tokens: 14, completion_tokens: 8 });
    expect(view!.shadow).toMatchObject({ requests: 2, errors: 0, prompt_tokens: 14, completion_tokens: 6 });
    expect(view!.shadow.ttft?.samples).toBe(2);
    expect(view!.in_flight).toBe(0);
  });

  it('drops a copy when the candidate has no ready replica, and counts no primary side for it', () => {
    const board = new ShadowBoard();
    const plan = shadowPlan(primary, 'chat')!;
    runner(board).launch(plan, copyTo(null, 'x'));
    runner(board).primaryEnded(plan, 0, 200, {});
    const [view] = board.views(() => undefined);
    expect(view).toMatchObject({ copied: 0, dropped: { no_replica: 1 }, primary: { requests: 0 } });
    expect(view!.share, 'a shadow no longer configured shows no share').toBeUndefined();
  });

  it('drops a copy the candidate cannot serve', () => {
    const board = new ShadowBoard();
    runner(board).launch(shadowPlan(primary, 'embeddings')!, copyTo(null, 'x'));
    expect(board.views(() => 1)[0]!.dropped.not_served).toBe(1);
  });

  it('drops a copy to a remote that speaks another API than chat, sending nothing', () => {
    // Guards against a chat body sent to an Anthropic or Responses remote's base URL as if it spoke chat.
    const board = new ShadowBoard();
    let picked = 0;
    const copy: ShadowCopy = {
      ...copyTo(null, 'x'),
      pick: () => {
        picked++;
        const remote = { kind: 'endpoint', timeoutMs: 0, api: 'anthropic' } as const;
        return { replica: { id: 'remote:cand', endpoint: 'x', draining: false, remote }, upstream: null as never };
      },
    };
    runner(board).launch(shadowPlan(primary, 'chat')!, copy);
    expect(picked).toBe(1);
    expect(board.views(() => 1)[0]).toMatchObject({ copied: 0, dropped: { not_served: 1 } });
  });

  it('asks a streamed copy for its usage', async () => {
    const e = await engine();
    e.release();
    runner(new ShadowBoard()).launch(shadowPlan(primary, 'chat')!, copyTo(e.pool, 's', true));
    await until('the copy arrives', () => e.bodies.length === 1);
    expect(e.bodies[0]!.stream_options).toEqual({ include_usage: true });
  });
});

describe('usageOf', () => {
  it.each([
    ['a whole answer', '{"usage":{"prompt_tokens":5,"completion_tokens":2}}', false, { prompt: 5, completion: 2 }],
    ['a whole answer without usage', '{"choices":[]}', false, { prompt: 0, completion: 0 }],
    ['not JSON', '<html>', false, { prompt: 0, completion: 0 }],
    [
      "a stream's last usage event",
      'data: {"usage":null}\n\ndata: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":4}}\n\ndata: [DONE]\n\n',
      true,
      { prompt: 9, completion: 4 },
    ],
    ['a stream without one', 'data: {"usage":null}\n\ndata: [DONE]\n\n', true, { prompt: 0, completion: 0 }],
  ])('%s', (_what, text, stream, expected) => {
    expect(usageOf(text, stream)).toEqual(expected);
  });
});
