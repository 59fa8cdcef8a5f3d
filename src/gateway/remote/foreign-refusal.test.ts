// A request a foreign remote cannot express, through the whole router: the
// remote is never sent it, a replica speaking Chat Completions serves it when
// the model has one, and when none does the client gets a 400 in its own
// dialect naming the field. Guards against the 502 such a request used to
// get (an SDK retries a 502, in vain: the request itself must change), and
// against that 400 hiding a replica that could have served it but failed.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { RouterReplica } from '../ports/index.js';
import { RequestLog } from '../core/request-log.js';
import {
  closeAll,
  cleanups,
  closedEndpoint,
  harness,
  model,
  simReplica,
} from '../../../test/support/gateway-router.js';

afterEach(closeAll);

/** A remote that counts what reaches it (nothing should), answering 500 if anything does. */
async function countingRemote(): Promise<{ url: string; hits: () => number }> {
  let hits = 0;
  const server: Server = createServer((_req, res) => {
    hits++;
    res.writeHead(500).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise((resolve) => server.close(resolve)));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, hits: () => hits };
}

const foreign = (id: string, endpoint: string, api: 'anthropic' | 'responses'): RouterReplica => ({
  id,
  endpoint,
  draining: false,
  engine: 'remote',
  remote: { kind: 'endpoint', timeoutMs: 0, api },
});

async function post(url: string, path: string, secret: string, body: object, headers: Record<string, string> = {}) {
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${secret}`, ...headers },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

const hi = [{ role: 'user', content: 'hi' }];

describe('a request a foreign remote cannot express', () => {
  it('is a 400 naming the field when every replica of the model is such a remote', async () => {
    const a = model({ name: 'alpha' });
    const log = new RequestLog(10);
    const h = await harness([a], { requestLog: log });
    const remote = await countingRemote();
    h.directory.set('alpha', [foreign('remote:r', remote.url, 'responses')]);
    const r = await post(h.url, '/v1/chat/completions', h.secret, { model: 'alpha', messages: hi, stop: ['x'] });
    expect(r.status, JSON.stringify(r.body)).toBe(400);
    const error = r.body.error as { message: string; param: string; type: string; llmgw_code: string };
    expect(error.param, 'the field to change').toBe('stop');
    expect(error.type).toBe('invalid_request_error');
    expect(error.llmgw_code).toBe('LLMGW_BAD_REQUEST');
    expect(error.message).toMatch(/stop: .*Responses API/);
    expect(error.message, 'says what to do').toContain('leave out `stop`');
    expect(remote.hits(), 'nothing was sent to the remote').toBe(0);
    const record = log.list()[0]!;
    expect(record.failure?.code, 'the request log says why').toBe('LLMGW_BAD_REQUEST');
    expect(record.attempts[0]?.reason).toMatch(/not sent to the responses remote/);
  });

  it("answers an Anthropic client in Anthropic's error shape", async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a]);
    const remote = await countingRemote();
    h.directory.set('alpha', [foreign('remote:r', remote.url, 'responses')]);
    const r = await post(
      h.url,
      '/v1/messages',
      h.secret,
      { model: 'alpha', max_tokens: 5, messages: hi, stop_sequences: ['x'] },
      { 'anthropic-version': '2023-06-01' },
    );
    expect(r.status, JSON.stringify(r.body)).toBe(400);
    expect(r.body.type).toBe('error');
    const error = r.body.error as { type: string; message: string };
    expect(error.type).toBe('invalid_request_error');
    expect(error.message, 'the field as the Anthropic client wrote it').toMatch(/^model `alpha`.*: stop_sequences: /);
    expect(error.message).toContain('leave out `stop_sequences`');
    expect(remote.hits()).toBe(0);
  });

  it("names the field as a Responses client wrote it, in OpenAI's shape", async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a]);
    const remote = await countingRemote();
    h.directory.set('alpha', [foreign('remote:r', remote.url, 'anthropic')]);
    const format = { type: 'json_schema', name: 's', schema: { type: 'object' } };
    const r = await post(h.url, '/v1/responses', h.secret, { model: 'alpha', input: 'hi', text: { format } });
    expect(r.status, JSON.stringify(r.body)).toBe(400);
    const error = r.body.error as { message: string; param: string };
    expect(error.param, 'Chat would say response_format').toBe('text.format');
    expect(error.message).toContain('leave out `text.format`');
    expect(remote.hits()).toBe(0);
  });

  it('is served by a replica that speaks Chat Completions when the model has one', async () => {
    const a = model({ name: 'alpha' });
    const log = new RequestLog(10);
    const h = await harness([a], { requestLog: log });
    const remote = await countingRemote();
    h.directory.set('alpha', [foreign('remote:r', remote.url, 'anthropic'), await simReplica(a)]);
    // Several requests, so the foreign remote is chosen first at least once whatever the chooser's tie-break.
    for (let i = 0; i < 4; i++) {
      const r = await post(h.url, '/v1/chat/completions', h.secret, { model: 'alpha', messages: hi, n: 2 });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
    }
    expect(remote.hits(), 'nothing was sent to the remote').toBe(0);
    const movedOn = log.list().filter((r) => r.attempts.length === 2 && r.attempts[0]!.replica === 'remote:r');
    expect(movedOn.length, 'the remote was tried first at least once, and the request moved on').toBeGreaterThan(0);
    for (const r of movedOn)
      expect(r.attempts[1]!.backoffMs, 'no backoff after a request turned away for a field').toBeUndefined();
  });

  it('stays a 502 when a replica that could have served it failed', async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a]);
    const remote = await countingRemote();
    h.directory.set('alpha', [
      foreign('remote:r', remote.url, 'anthropic'),
      { id: 'local', endpoint: await closedEndpoint(), draining: false },
    ]);
    const r = await post(h.url, '/v1/chat/completions', h.secret, { model: 'alpha', messages: hi, n: 2 });
    expect(r.status, JSON.stringify(r.body)).toBe(502);
    expect((r.body.error as { llmgw_code: string }).llmgw_code).toBe('LLMGW_UPSTREAM');
  });
});
