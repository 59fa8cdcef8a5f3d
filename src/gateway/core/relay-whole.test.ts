// The whole-answer relay between two real HTTP servers on loopback: an
// engine stand-in behind an undici pool, and a front whose handler relays
// each request through one WholeAnswerRelay, as an attempt does.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { once } from 'node:events';
import { Pool, request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { WholeAnswerRelay } from './relay-whole.js';
import type { Outcome, RelayHooks, RelayTarget } from './relay.js';
import type { TailKeeper } from './usage.js';

type Engine = (req: IncomingMessage, res: ServerResponse) => void;

interface Seen {
  outcome: Outcome | null;
  firstBytes: number;
  answered: { status: number; usage: ReturnType<TailKeeper['usage']> }[];
  broken: string[];
  writes: number;
  ends: number;
}

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (closers.length) await closers.pop()!();
});

async function listen(server: Server): Promise<string> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  closers.push(async () => {
    server.closeAllConnections();
    server.close();
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** The engine, and a front relaying each request to it; `seen` is what the last relay did. */
async function relayTo(engine: Engine, onFirstByte: () => void = () => {}): Promise<{ url: string; seen: Seen }> {
  const engineUrl = await listen(createServer(engine));
  const pool = new Pool(engineUrl);
  closers.push(() => pool.close());
  const seen: Seen = { outcome: null, firstBytes: 0, answered: [], broken: [], writes: 0, ends: 0 };
  const front = createServer((req, res) => {
    const write = res.write.bind(res);
    const end = res.end.bind(res);
    res.write = ((...args: Parameters<typeof write>) => (seen.writes++, write(...args))) as typeof res.write;
    res.end = ((...args: Parameters<typeof end>) => (seen.ends++, end(...args))) as typeof res.end;
    const target: RelayTarget & { clientGone: boolean } = {
      res,
      clientGone: false,
      timedOut: false,
      revoked: false,
      abort: null,
    };
    res.on('close', () => {
      if (!res.writableFinished) {
        target.clientGone = true;
        target.abort?.();
      }
    });
    const hooks: RelayHooks = {
      onFirstByte: () => {
        seen.firstBytes++;
        onFirstByte();
      },
      onAnswered: (status, tail) => seen.answered.push({ status, usage: tail.usage() }),
      brokenMessage: () => 'the engine stopped answering mid-response',
      brokenCode: () => ({ code: 'LLMGW_UPSTREAM', status: 502 }),
      onBroken: (reason) => seen.broken.push(reason),
      timeout: () => 504,
    };
    const resolve = (o: Outcome): void => {
      seen.outcome = o;
      // No answer reached the client: the front says so, as the attempt loop's refusal would.
      if (o.kind === 'retry' && !res.headersSent) end(JSON.stringify({ retry: o.reason }));
    };
    pool.dispatch({ path: '/', method: 'POST', body: '{}' }, new WholeAnswerRelay(target, hooks, resolve));
  });
  return { url: await listen(front), seen };
}

const ANSWER = JSON.stringify({
  id: 'chatcmpl-1',
  object: 'chat.completion',
  choices: [{ index: 0, message: { role: 'assistant', content: 'hello' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 7, completion_tokens: 2, total_tokens: 9 },
});

/**
 * An engine that declares `parts` × `part` bytes and sends one `part`, and
 * the front's first-byte hook that lets it go on with `then`: so what
 * `then` does happens after the relay wrote its first slice, never before.
 */
function oneSliceThen(part: Buffer, parts: number, then: (res: ServerResponse) => void): [Engine, () => void] {
  let next: (() => void) | null = null;
  const engine: Engine = (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(parts * part.length) });
    res.write(part);
    next = () => then(res);
  };
  return [engine, () => setImmediate(() => next?.())];
}

describe('WholeAnswerRelay', () => {
  it('writes a whole answer with its headers in one write, and reads its usage', async () => {
    const { url, seen } = await relayTo((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', server: 'engine', 'x-request-id': 'theirs' });
      res.write(ANSWER.slice(0, 40));
      setImmediate(() => res.end(ANSWER.slice(40)));
    });
    const res = await request(url, { method: 'POST', body: '{}' });
    expect(res.statusCode).toBe(200);
    expect(await res.body.text()).toBe(ANSWER);
    expect(res.headers['content-type']).toBe('application/json');
    // The engine's own identity and request id stay behind.
    expect(res.headers.server).toBeUndefined();
    expect(res.headers['x-request-id']).toBeUndefined();
    expect(seen.writes).toBe(0);
    expect(seen.ends).toBe(1);
    expect(seen.firstBytes).toBe(1);
    expect(seen.outcome).toEqual({ kind: 'done', status: 200 });
    expect(seen.answered).toEqual([{ status: 200, usage: { promptTokens: 7, completionTokens: 2 } }]);
  });

  it('passes an error the engine answered (4xx) through as it came', async () => {
    const body = JSON.stringify({ error: { message: 'max_tokens is too large', code: 400 } });
    const { url, seen } = await relayTo((_req, res) => {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(body);
    });
    const res = await request(url, { method: 'POST', body: '{}' });
    expect(res.statusCode).toBe(400);
    expect(await res.body.text()).toBe(body);
    expect(seen.outcome).toEqual({ kind: 'done', status: 400 });
  });

  it('writes nothing of a 502 or 503 and asks for another attempt', async () => {
    for (const status of [502, 503]) {
      const { url, seen } = await relayTo((_req, res) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end('{"error":"busy"}');
      });
      const res = await request(url, { method: 'POST', body: '{}' });
      expect(await res.body.json()).toEqual({ retry: `the engine answered ${status}` });
      expect(seen.outcome).toEqual({ kind: 'retry', reason: `the engine answered ${status}` });
      expect(seen.firstBytes).toBe(0);
      expect(seen.answered).toEqual([]);
    }
  });

  it('asks for another attempt when the engine breaks before its answer ends, nothing written', async () => {
    const { url, seen } = await relayTo((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(ANSWER.length) });
      res.write(ANSWER.slice(0, 20));
      setImmediate(() => res.destroy());
    });
    const res = await request(url, { method: 'POST', body: '{}' });
    const { retry } = (await res.body.json()) as { retry: string };
    expect(retry).toMatch(/^the answer broke before its first byte/);
    expect(seen.outcome?.kind).toBe('retry');
    expect(seen.firstBytes).toBe(0);
  });

  it('sends a large answer in slices as it comes, intact', async () => {
    const part = Buffer.alloc(300 * 1024, 'a');
    const { url, seen } = await relayTo(...oneSliceThen(part, 2, (res) => res.end(part)));
    const res = await request(url, { method: 'POST', body: '{}' });
    const got = Buffer.from(await res.body.arrayBuffer());
    expect(got.length).toBe(2 * part.length);
    expect(got.every((b) => b === 0x61)).toBe(true);
    expect(res.headers['content-length']).toBe(String(2 * part.length));
    expect(seen.writes).toBeGreaterThanOrEqual(1);
    expect(seen.outcome).toEqual({ kind: 'done', status: 200 });
  });

  it('cuts the connection when the engine breaks after a slice went out, and says why once', async () => {
    const part = Buffer.alloc(300 * 1024, 'b');
    const { url, seen } = await relayTo(...oneSliceThen(part, 3, (res) => res.destroy()));
    const res = await request(url, { method: 'POST', body: '{}' });
    expect(res.statusCode).toBe(200);
    await expect(res.body.arrayBuffer()).rejects.toThrow();
    await expect.poll(() => seen.outcome).toEqual({ kind: 'done', status: 502 });
    expect(seen.broken).toHaveLength(1);
    expect(seen.answered.map((a) => a.status)).toEqual([502]);
  });

  it('settles as gone, with no status, when the client leaves before the answer ends', async () => {
    let finish: (() => void) | null = null;
    const { url, seen } = await relayTo((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write(ANSWER.slice(0, 10));
      finish = () => res.end(ANSWER.slice(10));
    });
    const controller = new AbortController();
    const pending = request(url, { method: 'POST', body: '{}', signal: controller.signal });
    await expect.poll(() => finish !== null).toBe(true);
    controller.abort();
    await expect(pending).rejects.toThrow();
    await expect.poll(() => seen.outcome).toEqual({ kind: 'done', status: 0 });
    expect(seen.answered.map((a) => a.status)).toEqual([0]);
    expect(seen.firstBytes).toBe(0);
  });
});
