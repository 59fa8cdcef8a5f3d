import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminApiError, AdminApiUnreachableError, AdminClient } from './index.js';

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}

let server: Server;
let base: string;
const seen: Seen[] = [];
let answer: { status: number; body: string } = { status: 200, body: '{}' };

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (c: string) => (body += c));
    req.on('end', () => {
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      res.writeHead(answer.status, { 'content-type': 'application/json' }).end(answer.body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => new Promise<void>((r) => server.close(() => r())));

describe('AdminClient', () => {
  it('sends the token and the actor, and the body as JSON', async () => {
    answer = { status: 200, body: '{"added":"m"}' };
    const c = new AdminClient({ baseUrl: `${base}/`, token: 'tok', actor: 'ops@host' });
    expect(await c.addModel({ name: 'm', source: 'hf://o/m', profiles: [{ engine: 'sim' }] }, { force: true })).toEqual(
      { added: 'm' },
    );
    const last = seen.at(-1)!;
    expect(last.method).toBe('POST');
    expect(last.url).toBe('/api/v1/models?force=true');
    expect(last.headers.authorization).toBe('Bearer tok');
    expect(last.headers['x-llmgw-actor']).toBe('ops@host');
    expect(JSON.parse(last.body)).toMatchObject({ name: 'm' });
  });

  it('encodes ids in paths and queries, and sends no token when it has none', async () => {
    answer = { status: 200, body: '{"id":"a/b","state":"cordoned"}' };
    const c = new AdminClient({ baseUrl: base });
    await c.cordon('a/b');
    expect(seen.at(-1)!.url).toBe('/api/v1/nodes/a%2Fb/state');
    expect(JSON.parse(seen.at(-1)!.body)).toEqual({ state: 'cordon' });
    expect(seen.at(-1)!.headers.authorization).toBeUndefined();
    answer = { status: 200, body: '[]' };
    await c.replicas({ model: 'x y' });
    expect(seen.at(-1)!.url).toBe('/api/v1/replicas?model=x+y');
    await c.replicas();
    expect(seen.at(-1)!.url).toBe('/api/v1/replicas');
  });

  it("turns the server's refusal into a typed error with its status and its words", async () => {
    answer = {
      status: 400,
      body: JSON.stringify({ error: 'no known node could ever run this model, so it was not added' }),
    };
    const err = await new AdminClient({ baseUrl: base })
      .addModel({ name: 'm', source: 's', profiles: [{ engine: 'vllm' }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AdminApiError);
    expect(err).toMatchObject({
      status: 400,
      kind: 'placement_no_fit',
      serverMessage: 'no known node could ever run this model, so it was not added',
      path: '/api/v1/models',
    });

    answer = { status: 401, body: '{"error":"the admin token is wrong"}' };
    await expect(new AdminClient({ baseUrl: base }).nodes()).rejects.toMatchObject({
      kind: 'unauthorized',
      message: 'the admin token is wrong',
    });

    answer = { status: 502, body: '<html>bad gateway</html>' };
    await expect(new AdminClient({ baseUrl: base }).summary()).rejects.toMatchObject({
      status: 502,
      kind: 'server',
      serverMessage: '<html>bad gateway</html>',
    });
  });

  it('says what to do when nothing listens', async () => {
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
    await new Promise<void>((r) => closed.close(() => r()));
    const err = await new AdminClient({ baseUrl: url }).summary().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AdminApiUnreachableError);
    expect((err as Error).message).toBe(
      `cannot reach the admin API at ${url} (connection refused): is \`llmgw control\` running? set LLMGW_ADMIN_URL`,
    );
  });
});
