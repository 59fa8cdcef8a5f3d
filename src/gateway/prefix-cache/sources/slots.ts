// The llama.cpp source: llama-server publishes no KV events, but GET /slots
// shows each slot's last prompt (as text, special tokens included) and what
// it generated, which is what that slot's cache holds until its next task.
// So this source polls /slots, tokenises a changed slot's text with the
// engine's own POST /tokenize, cuts it into blocks of `blockSize` tokens
// (only whole blocks: a partial one cannot be matched block for block) and
// turns the difference from the last poll into stored/removed events.
//
// Block ids are made as src/protocol/kv-blocks.ts makes them (the builtin
// engine's sequences use the same): the slot number and a chain hash over
// the tokens, so the same prefix in two slots is two blocks (llama.cpp keeps
// a copy per slot) and a removal names exactly one. Separate from the other
// sources because it is a poller: it has no gaps, only failed polls, and
// after one it starts again with 'cleared' and everything it sees.
import { runBlocks, runDiff } from '../../../protocol/kv-blocks.js';
import type { KvBlock, KvEvent, KvEventsEndpoint } from '../../../protocol/kv-events.js';
import { sleep } from './http.js';
import type { CompiledKvSourceOptions, KvSource, KvSourceTarget } from './index.js';

type SlotsEndpoint = Extract<KvEventsEndpoint, { kind: 'slots' }>;

/** What one slot holds, as the last poll saw it. */
interface SlotState {
  readonly text: string;
  readonly blocks: readonly KvBlock[];
}

/** A slot's tokens as whole blocks, each with an id unique on this engine (the slot number is the holder). */
export const slotBlocks: (slotId: number, tokens: readonly number[], blockSize: number) => KvBlock[] = runBlocks;

/** The events that turn `before` into `after` for one slot: its common leading blocks stay. */
export const slotDiff: (before: readonly KvBlock[], after: readonly KvBlock[]) => KvEvent[] = runDiff;

interface SlotJson {
  id?: unknown;
  prompt?: unknown;
  generated?: unknown;
}

export function openSlotsKvSource(target: KvSourceTarget, spec: SlotsEndpoint, o: CompiledKvSourceOptions): KvSource {
  const abort = new AbortController();
  const base = target.endpoint.endsWith('/') ? target.endpoint : `${target.endpoint}/`;
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (target.engineSecret !== undefined) headers.authorization = `Bearer ${target.engineSecret}`;
  const slots = new Map<number, SlotState>();
  let seq = 0;
  /** True until a poll succeeds after opening or a failure: the next batch opens with 'cleared'. */
  let fresh = true;

  async function getJson(path: string, body?: unknown): Promise<unknown> {
    const res = await o.fetch(new URL(path, base), {
      method: body === undefined ? 'GET' : 'POST',
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: abort.signal,
    });
    if (!res.ok) {
      await res.body?.cancel();
      throw new Error(`${body === undefined ? 'GET' : 'POST'} ${path} answered ${res.status}`);
    }
    return res.json();
  }

  async function tokenize(text: string): Promise<number[]> {
    // parse_special: the slot's text carries the template's special tokens as text; add_special: no second BOS.
    const answer = (await getJson('tokenize', { content: text, add_special: false, parse_special: true })) as {
      tokens?: unknown;
    };
    const tokens = answer.tokens;
    if (!Array.isArray(tokens)) throw new Error('POST /tokenize answered no list of tokens');
    // With_pieces answers [{id, piece}]; plain answers ids.
    return tokens.map((t) => (typeof t === 'number' ? t : Number((t as { id?: unknown }).id)));
  }

  async function poll(): Promise<void> {
    const list = await getJson('slots');
    if (!Array.isArray(list)) throw new Error('GET /slots answered no list');
    const events: KvEvent[] = fresh ? [{ kind: 'cleared' }] : [];
    if (fresh) slots.clear();
    const seen = new Set<number>();
    for (const s of list as SlotJson[]) {
      if (typeof s.id !== 'number') continue;
      seen.add(s.id);
      const text =
        (typeof s.prompt === 'string' ? s.prompt : '') + (typeof s.generated === 'string' ? s.generated : '');
      const was = slots.get(s.id);
      if (was?.text === text) continue;
      const blocks = text === '' ? [] : slotBlocks(s.id, await tokenize(text), spec.blockSize);
      events.push(...slotDiff(was?.blocks ?? [], blocks));
      slots.set(s.id, { text, blocks });
    }
    for (const [id, was] of slots) {
      if (seen.has(id)) continue;
      events.push(...slotDiff(was.blocks, []));
      slots.delete(id);
    }
    fresh = false;
    if (events.length > 0 && !abort.signal.aborted)
      o.onBatch({ seq: seq++, atMs: Date.now(), blockSize: spec.blockSize, events });
  }

  const running = (async () => {
    let delayMs = o.retryMs;
    let wasDown = true;
    while (!abort.signal.aborted) {
      try {
        await poll();
        if (wasDown) o.onStatus({ kind: 'live' });
        wasDown = false;
        delayMs = o.retryMs;
        await sleep(o.pollMs, abort.signal);
      } catch (err) {
        if (abort.signal.aborted) return;
        fresh = true;
        wasDown = true;
        o.onStatus({ kind: 'down', detail: (err as Error).message, retryInMs: delayMs });
        await sleep(delayMs, abort.signal);
        delayMs = Math.min(delayMs * 2, o.maxRetryMs);
      }
    }
  })();

  return {
    replicaId: target.id,
    async close() {
      abort.abort();
      await running;
    },
  };
}
