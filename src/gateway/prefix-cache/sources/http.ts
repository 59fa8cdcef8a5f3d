// The HTTP stream source: the builtin and sim engines answer a long-lived GET
// with KvEventBatch as JSON lines (application/x-ndjson). Separate from the
// ZeroMQ source because its recovery is simpler and stronger: the engine
// opens every stream with a snapshot (a batch that starts with 'cleared' and
// stores every block it holds), so a reconnect loses nothing. A seq that
// does not follow the previous one within a stream (it should not happen)
// is still shown as the contract says: that batch gets 'cleared' put first.
import { LlmgwError } from '../../../errors/index.js';
import type { KvEvent, KvEventBatch, KvEventsEndpoint } from '../../../protocol/kv-events.js';
import type { CompiledKvSourceOptions, KvSource, KvSourceTarget } from './index.js';

type HttpEndpoint = Extract<KvEventsEndpoint, { kind: 'http' }>;

function bad(detail: string): LlmgwError {
  return new LlmgwError('LLMGW_UPSTREAM', `the engine's KV event stream sent a line llmgw cannot read: ${detail}`);
}

function isIntList(v: unknown): v is number[] {
  return Array.isArray(v) && v.every((t) => typeof t === 'number' && Number.isInteger(t));
}

function parseEvent(e: unknown): KvEvent {
  const o = e as Record<string, unknown> | null;
  switch (o?.kind) {
    case 'cleared':
      return { kind: 'cleared' };
    case 'removed':
      if (!Array.isArray(o.hashes) || !o.hashes.every((h) => typeof h === 'string'))
        throw bad('a removed event has no list of hashes');
      return { kind: 'removed', hashes: o.hashes as string[] };
    case 'stored': {
      if (!Array.isArray(o.blocks)) throw bad('a stored event has no list of blocks');
      const blocks = o.blocks.map((b: unknown) => {
        const x = b as Record<string, unknown> | null;
        if (typeof x?.hash !== 'string' || !isIntList(x.tokens)) throw bad('a block wants {hash, tokens}');
        return { hash: x.hash, tokens: x.tokens };
      });
      if (o.parent !== undefined && typeof o.parent !== 'string') throw bad('parent is not a string');
      return o.parent === undefined ? { kind: 'stored', blocks } : { kind: 'stored', parent: o.parent, blocks };
    }
    default:
      throw bad(`unknown event kind ${JSON.stringify(o?.kind)}`);
  }
}

/** One line of the stream as a batch; throws LLMGW_UPSTREAM naming what is wrong. */
export function parseKvBatchLine(line: string): KvEventBatch {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(line) as Record<string, unknown>;
  } catch (err) {
    throw bad(`not JSON (${(err as Error).message})`);
  }
  if (typeof o !== 'object' || o === null) throw bad('not an object');
  if (typeof o.seq !== 'number' || !Number.isInteger(o.seq)) throw bad('seq is not an integer');
  if (typeof o.blockSize !== 'number' || !Number.isInteger(o.blockSize) || o.blockSize < 1)
    throw bad('blockSize is not a positive integer');
  if (!Array.isArray(o.events)) throw bad('events is not a list');
  const events = o.events.map(parseEvent);
  const batch = { seq: o.seq, blockSize: o.blockSize, events };
  return typeof o.atMs === 'number' ? { ...batch, atMs: o.atMs } : batch;
}

export function openHttpKvSource(target: KvSourceTarget, spec: HttpEndpoint, o: CompiledKvSourceOptions): KvSource {
  const abort = new AbortController();
  const url = new URL(spec.path, target.endpoint.endsWith('/') ? target.endpoint : `${target.endpoint}/`).toString();
  const headers: Record<string, string> = { accept: 'application/x-ndjson' };
  if (target.engineSecret !== undefined) headers.authorization = `Bearer ${target.engineSecret}`;

  /** Reads one connection to its end; returns whether it got any batch (a working stream resets the backoff). */
  async function stream(): Promise<boolean> {
    const res = await o.fetch(url, { headers, signal: abort.signal });
    if (!res.ok || res.body === null) {
      await res.body?.cancel();
      throw new Error(`GET ${url} answered ${res.status}`);
    }
    o.onStatus({ kind: 'live' });
    let expected: number | null = null;
    let got = false;
    let rest = '';
    const decoder = new TextDecoder();
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      rest += decoder.decode(chunk, { stream: true });
      let nl: number;
      while ((nl = rest.indexOf('\n')) !== -1) {
        const line = rest.slice(0, nl).trim();
        rest = rest.slice(nl + 1);
        if (line === '') continue;
        let batch = parseKvBatchLine(line);
        // The first batch of a connection must clear: what was held before the reconnect is unknown.
        const opensClear = batch.events[0]?.kind === 'cleared';
        if (!opensClear && (expected === null || batch.seq !== expected)) {
          if (expected !== null) o.onStatus({ kind: 'gap', from: expected, to: batch.seq - 1, recovered: false });
          batch = { ...batch, events: [{ kind: 'cleared' }, ...batch.events] };
        }
        expected = batch.seq + 1;
        got = true;
        if (!abort.signal.aborted) o.onBatch(batch);
      }
    }
    return got;
  }

  const running = (async () => {
    let delayMs = o.retryMs;
    while (!abort.signal.aborted) {
      let detail = 'the stream ended';
      try {
        if (await stream()) delayMs = o.retryMs;
      } catch (err) {
        if (abort.signal.aborted) return;
        detail = (err as Error).message;
      }
      if (abort.signal.aborted) return;
      o.onStatus({ kind: 'down', detail, retryInMs: delayMs });
      await sleep(delayMs, abort.signal);
      delayMs = Math.min(delayMs * 2, o.maxRetryMs);
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

/** Resolves after `ms`, or at once when `signal` aborts. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
