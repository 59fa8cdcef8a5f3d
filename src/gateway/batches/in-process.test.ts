// The in-process entry point batch lines run through. Guards against two
// failures: a line that skipped the gateway's path (no usage charged to its
// key, no request log), and (the worse one) a client on the network using
// the entry point to bypass authentication by sending its header, even with
// the nonce of a call in progress.
import type { FastifyInstance, InjectOptions } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { issueKey } from '../../control/keys/index.js';
import { closeAll, eventually, listen, model, simReplica } from '../../../test/support/gateway-router.js';
import { RequestLog } from '../core/request-log.js';
import { IN_PROCESS_HEADER } from './in-process.js';

afterEach(closeAll);

const chat = { model: 'alpha', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] };

describe('in-process calls', () => {
  it('run as the given key through the whole path: usage under its id, the request log', async () => {
    const a = model({ name: 'alpha' });
    const requestLog = new RequestLog();
    const h = await listen([a], { requestLog });
    h.directory.set('alpha', [await simReplica(a)]);
    const { record } = await issueKey(h.keys, { name: 'batch-owner' }, Date.now(), 'test');
    const answer = await h.router.inProcess.post(record, '/v1/chat/completions', chat);
    expect(answer.status, answer.body).toBe(200);
    expect(JSON.parse(answer.body)).toMatchObject({ object: 'chat.completion' });
    await eventually(() => h.usage.snapshot().some((t) => t.keyId === record.id), 'usage charged to the key');
    expect(requestLog.list({}).length).toBeGreaterThan(0);
  });

  it('refuses a revoked key as the key hook refuses any', async () => {
    const a = model({ name: 'alpha' });
    const h = await listen([a]);
    h.directory.set('alpha', [await simReplica(a)]);
    const { record } = await issueKey(h.keys, { name: 'gone' }, Date.now(), 'test');
    const answer = await h.router.inProcess.post({ ...record, revokedAtMs: Date.now() }, '/v1/chat/completions', chat);
    expect(answer.status).toBe(401);
  });

  it('cannot be reached from the network, even with the nonce of a call in progress', async () => {
    const a = model({ name: 'alpha' });
    const h = await listen([a]);
    h.directory.starting.add('alpha');
    const { record } = await issueKey(h.keys, { name: 'batch-owner' }, Date.now(), 'test');
    // The listener's own inject, watched: the nonce of the call is what a network client would need.
    let nonce: string | undefined;
    h.router.inProcess.attach({
      inject: (o: InjectOptions) => {
        nonce = (o.headers as Record<string, string>)[IN_PROCESS_HEADER];
        return h.app.inject(o);
      },
    } as unknown as FastifyInstance);
    // Held: alpha has no ready replica yet, one is starting.
    const pending = h.router.inProcess.post(record, '/v1/chat/completions', chat);
    await eventually(() => nonce !== undefined, 'the call went in');
    for (const authorization of [undefined, 'Bearer not-a-key']) {
      const res = await fetch(`${h.url}/v1/chat/completions`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          [IN_PROCESS_HEADER]: nonce!,
          ...(authorization ? { authorization } : {}),
        },
        body: JSON.stringify(chat),
      });
      expect(res.status, 'a socket request with the live nonce is checked as any other').toBe(401);
    }
    h.directory.set('alpha', [await simReplica(a)]);
    expect((await pending).status).toBe(200);
  });
});
