// The interceptors around an upstream attempt, without a network: the order
// they compose in, the request ids they make, the body the engine hears.
import { describe, expect, it } from 'vitest';
import { compileModel, ModelSchema } from '../../control/catalog/index.js';
import {
  compose,
  replicaUse,
  requestId,
  rewriteBody,
  type Attempt,
  type Dispatch,
  type Interceptor,
} from './dispatch.js';
import type { ReplicaUse } from '../../control/scaling/index.js';
import { parseRequest } from './validate.js';
import type { FinishedSends } from './finished-sends.js';

const model = (name: string, aliases: string[] = []) =>
  compileModel(
    ModelSchema.parse({ name, aliases, source: `file:///models/${name}`, profiles: [{ engine: 'sim' }] }),
    'file',
  );

function attempt(body: string, servedNames?: string[], native?: string): Attempt {
  const raw = Buffer.from(body);
  const m = model('m', ['alias']);
  const parsed = parseRequest('chat', raw, { maxN: 16, maxTokens: 1000 });
  return {
    ex: { id: 'req-1', parsed, raw, requested: m, startedAt: 0, dispatched: false, usageRefused: false },
    model: m,
    replica: { id: 'r1', endpoint: 'http://127.0.0.1:1', draining: false, ...(servedNames ? { servedNames } : {}) },
    path: native === undefined ? '/v1/chat/completions' : '/v1/responses',
    passThrough: native !== undefined,
    body: native === undefined ? raw : Buffer.from(native),
    headers: {},
  };
}

const answered: Dispatch = async () => ({ kind: 'done', status: 200 });

describe('the dispatch chain', () => {
  it('runs the first interceptor outermost: it sees the attempt first and its end last', async () => {
    const seen: string[] = [];
    const mark =
      (name: string): Interceptor =>
      (next) =>
      async (a) => {
        seen.push(`${name} in`);
        const o = await next(a);
        seen.push(`${name} out`);
        return o;
      };
    await compose(answered, [mark('a'), mark('b')])(
      attempt('{"model":"m","messages":[{"role":"user","content":"hi"}]}'),
    );
    expect(seen).toEqual(['a in', 'b in', 'b out', 'a out']);
  });

  it('gives every attempt its own upstream request id, made from the client request id and the tag', async () => {
    const ids: string[] = [];
    const send = compose(
      async (a) => {
        ids.push(a.headers['x-request-id']!);
        return { kind: 'done', status: 200 };
      },
      [requestId('.tag')],
    );
    await send(attempt('{"model":"m","messages":[{"role":"user","content":"hi"}]}'));
    await send(attempt('{"model":"m","messages":[{"role":"user","content":"hi"}]}'));
    expect(ids).toEqual(['req-1-1.tag', 'req-1-2.tag']);
  });

  it('sends the client bytes as they are unless a rename or a usage request is due, then appends the fields', async () => {
    let body = '';
    const send = compose(
      async (a) => {
        body = a.body.toString();
        return { kind: 'done', status: 200 };
      },
      [rewriteBody()],
    );
    const plain = '{"model":"alias","messages":[{"role":"user","content":"hi"}]} ';
    await send(attempt(plain));
    expect(body, 'the model answers to its aliases: nothing to rewrite').toBe(plain);
    await send(attempt(plain, ['m']));
    expect(body, 'a replica serving only the canonical name hears it').toBe(
      '{"model":"alias","messages":[{"role":"user","content":"hi"}],"model":"m"} ',
    );
    await send(attempt('{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}'));
    expect(JSON.parse(body).stream_options, 'a stream is asked for its usage').toEqual({ include_usage: true });
    const chatStream = '{"model":"alias","messages":[{"role":"user","content":"hi"}],"stream":true}';
    await send(attempt(chatStream, ['m'], '{"model":"alias","input":"hi","stream":true}'));
    expect(body, 'a body passed through in its own API is renamed, never given stream_options').toBe(
      '{"model":"alias","input":"hi","stream":true,"model":"m"}',
    );
  });

  // A key with a token limit reserved 1024 for a request that set no max_tokens, and the engine then generated
  // to its context's end: one request cost the key many times its per-minute figure.
  it('holds a request that set no max_tokens to its reserved completion, except in a body passed through', async () => {
    let body = '';
    const send = compose(
      async (a) => {
        body = a.body.toString();
        return { kind: 'done', status: 200 };
      },
      [rewriteBody()],
    );
    const capped = (b: string, native?: string): Attempt => {
      const a = attempt(b, undefined, native);
      return { ...a, ex: { ...a.ex, completionCap: 200 } };
    };
    await send(capped('{"model":"m","messages":[{"role":"user","content":"hi"}]}'));
    expect(JSON.parse(body).max_tokens, 'the engine hears the reserved completion as max_tokens').toBe(200);
    await send(capped('{"model":"m","messages":[{"role":"user","content":"hi"}]}', '{"model":"m","input":"hi"}'));
    expect(body, 'a Responses body passed through is not given a chat field').toBe('{"model":"m","input":"hi"}');
  });

  it('counts the attempt in flight on its replica until its outcome, and stamps its last use', async () => {
    const use: ReplicaUse = { inFlight: 0, lastUsedAtMs: null };
    const sends = new Map<string, number[]>();
    const finished = new Map<string, FinishedSends>();
    let clock = 40;
    let during: unknown = null;
    const book = { useOf: () => use, sends, finished, keepFinishedMs: 1_000, now: () => clock };
    const send = compose(
      async (a) => {
        during = { inFlight: use.inFlight, sends: [...(sends.get(a.replica.id) ?? [])] };
        clock = 42;
        return { kind: 'done', status: 200 };
      },
      [replicaUse(book)],
    );
    await send(attempt('{"model":"m","messages":[{"role":"user","content":"hi"}]}'));
    expect(during).toEqual({ inFlight: 1, sends: [40] });
    expect(use).toEqual({ inFlight: 0, lastUsedAtMs: 42 });
    expect(sends.size, 'an empty in-flight list is dropped').toBe(0);
    expect([...finished.keys()]).toEqual(['r1']);
    expect(finished.get('r1')!.size).toBe(1);
    expect(finished.get('r1')!.finishedSince(41), 'sent at 40, ended at 42').toBe(1);
  });

  it('settles the bookkeeping of an attempt that failed with an error, and passes the error on', async () => {
    const use: ReplicaUse = { inFlight: 0, lastUsedAtMs: null };
    const sends = new Map<string, number[]>();
    const send = compose(async () => {
      throw new Error('the pool is closed');
    }, [replicaUse({ useOf: () => use, sends, finished: new Map(), keepFinishedMs: 0, now: () => 7 })]);
    await expect(send(attempt('{"model":"m","messages":[{"role":"user","content":"hi"}]}'))).rejects.toThrow(
      'the pool is closed',
    );
    expect(use).toEqual({ inFlight: 0, lastUsedAtMs: 7 });
    expect(sends.size).toBe(0);
  });
});
