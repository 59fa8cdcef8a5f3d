import { describe, expect, it } from 'vitest';
import type { KvEventBatch } from '../../protocol/kv-events.js';
import { CacheRouting, type PublishingReplica } from './cache-routing.js';
import type { KvSourceOptions, KvSourceTarget } from './sources/index.js';

/** A tokenizer as the sim's: one token per 4 characters of the messages' text, ids from the characters. */
function simTokens(text: string): number[] {
  const out: number[] = [];
  for (let i = 0; i < text.length; i += 4)
    out.push(1 + [...text.slice(i, i + 4)].reduce((h, ch) => h * 131 + ch.charCodeAt(0), 0));
  return out;
}

function setup() {
  const opened: KvSourceTarget[] = [];
  const closed: string[] = [];
  const feeds = new Map<string, (b: KvEventBatch) => void>();
  let tokenizeCalls = 0;
  let failTokenize = false;
  let now = 1000;
  const fetch = (async (_url: string | URL, init?: RequestInit) => {
    tokenizeCalls++;
    if (failTokenize) return new Response('no', { status: 500 });
    const body = JSON.parse(String(init!.body)) as { messages: { content: string }[] };
    const text = body.messages.map((m) => m.content).join('');
    return Response.json({ tokens: simTokens(text) });
  }) as typeof globalThis.fetch;
  const routing = new CacheRouting({
    maxBlocks: 1000,
    tokenizeTimeoutMs: 1000,
    tokenCacheEntries: 100,
    tokenizerBackoffMs: 5000,
    maxTokenizing: 8,
    now: () => now,
    random: () => 0,
    fetch,
    openSource: (target: KvSourceTarget, options: KvSourceOptions) => {
      opened.push(target);
      feeds.set(target.id, options.onBatch);
      return { replicaId: target.id, close: async () => void closed.push(target.id) };
    },
  });
  const replica = (id: string, events = true): PublishingReplica => ({
    id,
    endpoint: `http://127.0.0.1:1/${id}`,
    draining: false,
    engine: 'sim',
    ...(events ? { kvEvents: { kind: 'http' as const, path: '/kv-events' } } : {}),
  });
  return {
    routing,
    opened,
    closed,
    feeds,
    replica,
    calls: () => tokenizeCalls,
    failTokenize: (v: boolean) => (failTokenize = v),
    advance: (ms: number) => (now += ms),
  };
}

/** The engine's stored events for `text` in blocks of 4 tokens. */
function storedBatch(seq: number, text: string, tag: string): KvEventBatch {
  const tokens = simTokens(text);
  const blocks = [];
  for (let i = 0; i + 4 <= tokens.length; i += 4) blocks.push({ hash: `${tag}${i}`, tokens: tokens.slice(i, i + 4) });
  return { seq, blockSize: 4, events: [{ kind: 'stored', blocks }] };
}

const SYSTEM = 'You are a careful assistant. '.repeat(8);

const text = (messages: { content: string }[]) => messages.map((m) => m.content).join('');

describe('prefix-cache routing state', () => {
  it('reads the events of the replicas that publish, and none of the rest', () => {
    const t = setup();
    const cands = [t.replica('a'), t.replica('b'), t.replica('quiet', false)];
    t.routing.view('m', cands, { messages: [{ role: 'user', content: 'hi' }] });
    expect(t.opened.map((o) => o.id)).toEqual(['a', 'b']);
    t.routing.follow(cands);
    expect(t.opened.length, 'a second sight opens nothing new').toBe(2);
  });

  it('is least-load (no hit anywhere) until an engine has said its block size, tokenising meanwhile', async () => {
    const t = setup();
    const cands = [t.replica('a')];
    const body = { messages: [{ role: 'user', content: SYSTEM }] };
    expect(t.routing.view('m', cands, body)).toEqual({ promptTokens: 0, cached: new Map() });
    await t.routing.settled();
    expect(t.calls(), 'the prompt, for when the engines have said').toBe(1);
  });

  it("looks up a conversation's next turn by its previous turn, tokenised in the background", async () => {
    const t = setup();
    const cands = [t.replica('a'), t.replica('b')];
    t.routing.follow(cands);
    t.feeds.get('b')!(storedBatch(0, SYSTEM, 'b'));
    const turn1 = [
      { role: 'system', content: SYSTEM },
      { role: 'user', content: 'first question, please' },
    ];
    expect(
      t.routing.view('m', cands, { messages: turn1 }),
      'nothing of it tokenised yet: route by text',
    ).toBeUndefined();
    await t.routing.settled();
    expect(t.calls(), 'the whole prompt and its first message').toBe(2);
    // Replica a served turn 1, and says so.
    t.feeds.get('a')!(storedBatch(0, text(turn1), 'a'));
    const turn2 = [...turn1, { role: 'assistant', content: 'an answer' }, { role: 'user', content: 'more' }];
    const view = t.routing.view('m', cands, { messages: turn2 })!;
    const bFull = Math.floor(simTokens(SYSTEM).length / 4) * 4;
    expect(view.cached.get('b'), 'b holds the system prompt').toBe(bFull);
    expect(view.cached.get('a')!, 'a holds the first turn too').toBeGreaterThan(bFull);
    expect(view.promptTokens, 'the tokenised turn plus an estimate of the rest').toBe(
      simTokens(text(turn1)).length + Math.ceil('an answermore'.length / 4),
    );
  });

  it('gives a new conversation the hits of a system prompt another one tokenised', async () => {
    const t = setup();
    const cands = [t.replica('a'), t.replica('b')];
    t.routing.follow(cands);
    t.feeds.get('a')!(storedBatch(0, SYSTEM, 'a'));
    t.routing.view('m', cands, {
      messages: [
        { role: 'system', content: SYSTEM },
        { role: 'user', content: 'x' },
      ],
    });
    await t.routing.settled();
    const other = {
      messages: [
        { role: 'system', content: SYSTEM },
        { role: 'user', content: 'another talk' },
      ],
    };
    const view = t.routing.view('m', cands, other)!;
    expect(view.cached.get('a')).toBe(Math.floor(simTokens(SYSTEM).length / 4) * 4);
    expect(view.cached.get('b') ?? 0, 'b has said nothing: no hit').toBe(0);
  });

  it('routes by text (no view) while the tokenizer fails, and asks again after the back-off', async () => {
    const t = setup();
    const cands = [t.replica('a')];
    t.routing.follow(cands);
    t.feeds.get('a')!(storedBatch(0, SYSTEM, 'a'));
    t.failTokenize(true);
    const body = { messages: [{ role: 'user', content: 'one' }] };
    expect(t.routing.view('m', cands, body)).toBeUndefined();
    await t.routing.settled();
    expect(t.routing.view('m', cands, body)).toBeUndefined();
    await t.routing.settled();
    expect(t.calls(), 'skipped during the back-off').toBe(1);
    t.failTokenize(false);
    t.advance(6000);
    t.routing.view('m', cands, body);
    await t.routing.settled();
    expect(t.routing.view('m', cands, body)?.promptTokens).toBe(simTokens('one').length);
    expect(t.calls()).toBe(2);
  });

  it('answers no view for candidates that publish nothing, so the choice stays as it was', () => {
    const t = setup();
    expect(
      t.routing.view('m', [t.replica('x', false)], { messages: [{ role: 'user', content: 'q' }] }),
    ).toBeUndefined();
    expect(t.opened).toEqual([]);
  });

  it('closes the source of a replica that went and forgets its blocks', () => {
    const t = setup();
    t.routing.follow([t.replica('a'), t.replica('b')]);
    t.feeds.get('a')!(storedBatch(0, SYSTEM, 'a'));
    t.routing.forget(new Set(['b']));
    expect(t.closed).toEqual(['a']);
    expect(t.routing.index.sizeOf('a')).toBe(0);
    expect(t.routing.followed()).toEqual(['b']);
    // A late batch from the closed source is ignored.
    t.feeds.get('a')!(storedBatch(1, SYSTEM, 'a'));
    expect(t.routing.index.sizeOf('a')).toBe(0);
  });

  it('reopens a source whose replica now publishes elsewhere', () => {
    const t = setup();
    t.routing.follow([t.replica('a')]);
    t.routing.follow([{ ...t.replica('a'), kvEvents: { kind: 'http', path: '/other' } }]);
    expect(t.opened.length).toBe(2);
    expect(t.closed).toEqual(['a']);
  });
});
