import { connect, type Socket } from 'node:net';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../test/support/wait.js';
import { createJsonApp, type ErrorShaper } from './index.js';

const apps: FastifyInstance[] = [];
const sockets: Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await Promise.all(apps.splice(0).map((a) => a.close()));
});

/** A listener's log lines, kept for the test to read. */
function collectingLogger(): { logger: pino.Logger; lines: string[] } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  return { logger: pino({ level: 'info' }, sink), lines };
}

const shape: ErrorShaper = (e) => ({ error: { message: e.message, llmgw_code: e.code } });

async function listen(app: FastifyInstance): Promise<number> {
  apps.push(app);
  await app.listen({ host: '127.0.0.1', port: 0 });
  return (app.server.address() as { port: number }).port;
}

/** Sends `bytes` and collects whatever comes back until the server closes. */
function exchange(port: number, bytes: string): Promise<{ text: string; closed: Promise<void> }> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    sockets.push(socket);
    const out = { text: '', closed: new Promise<void>((r) => socket.once('close', () => r())) };
    socket.setEncoding('utf8').on('data', (c: string) => (out.text += c));
    socket.on('error', () => {});
    socket.once('connect', () => {
      if (bytes) socket.write(bytes);
      resolve(out);
    });
  });
}

describe('a JSON listener', () => {
  // Regression: a timeout before any request arrived was answered with a 408 that no client asked
  // for; on a TLS socket whose handshake never finished, that write held the connection open for good.
  it('closes a connection that sent nothing, or half a request line, at the headers timeout without writing to it', async () => {
    const port = await listen(
      createJsonApp({ logger: pino({ level: 'silent' }), bodyLimitBytes: 1024, headersTimeoutMs: 400 }),
    );
    const quiet = await exchange(port, '');
    const half = await exchange(port, 'GET /pi');
    await Promise.all([quiet.closed, half.closed]);
    expect(quiet.text, 'nothing written to a silent connection').toBe('');
    expect(half.text, 'nothing written to a half request').toBe('');
  });

  it("still answers what the HTTP parser refused, in the listener's shape", async () => {
    const port = await listen(
      createJsonApp({ logger: pino({ level: 'silent' }), bodyLimitBytes: 1024, shapeError: shape }),
    );
    const answer = await exchange(port, 'GET / HTTP/1.1\r\nHost: x\r\nBad\u0000Header: y\r\n\r\n');
    await answer.closed;
    expect(answer.text).toMatch(/^HTTP\/1\.1 400 /);
    expect(JSON.parse(answer.text.slice(answer.text.indexOf('\r\n\r\n') + 4))).toMatchObject({
      error: { llmgw_code: 'LLMGW_BAD_REQUEST' },
    });
  });

  // Regression: a socket timeout the route armed for the body (the router's idle body timeout) closed
  // the connection with no answer, so a slow client could not tell a timeout from a crash.
  it("answers a body stalled past a socket timeout with 408 in the listener's shape, once", async () => {
    const { logger, lines } = collectingLogger();
    const app = createJsonApp({ logger, bodyLimitBytes: 4096, shapeError: shape });
    app.addHook('onRequest', async (request) => void request.raw.socket.setTimeout(300));
    app.post('/echo', async (request) => request.body);
    const port = await listen(app);
    const answer = await exchange(
      port,
      'POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a":',
    );
    await answer.closed;
    expect(answer.text).toMatch(/^HTTP\/1\.1 408 /);
    expect(answer.text.toLowerCase()).toContain('connection: close');
    expect(JSON.parse(answer.text.slice(answer.text.indexOf('\r\n\r\n') + 4))).toEqual({
      error: {
        message: 'the request (its headers or its body) took too long to arrive; the connection is closed',
        llmgw_code: 'LLMGW_REQUEST_TIMEOUT',
      },
    });
    await waitFor('the refusal logged', () => lines.some((l) => l.includes('LLMGW_REQUEST_TIMEOUT')));
    expect(
      lines.filter((l) => l.includes('already sent')),
      'no second answer attempted',
    ).toEqual([]);
  });

  // Regression: a connection whose answer was still being written when close() was called stayed open for the
  // whole keep-alive timeout (72 s) once that answer ended, and close() (a plane's shutdown) waited for it.
  it('closes a connection whose answer ends after close() began, so close() does not wait out its keep-alive', async () => {
    const app = createJsonApp({ logger: pino({ level: 'silent' }), bodyLimitBytes: 4096 });
    let finish: () => void = () => {};
    const started = new Promise<void>((began) => {
      app.get('/slow', (_request, reply) => {
        reply.hijack();
        reply.raw.writeHead(200, { 'content-type': 'text/plain', 'transfer-encoding': 'chunked' });
        reply.raw.write('first ');
        finish = () => reply.raw.end('last');
        began();
      });
    });
    const port = await listen(app);
    const answer = await exchange(port, 'GET /slow HTTP/1.1\r\nHost: x\r\n\r\n');
    await started;
    apps.splice(apps.indexOf(app), 1);
    const closing = app.close();
    // The answer ends only once the server has stopped listening: Node closed the connections idle at that moment.
    await waitFor('the listener closed', () => !app.server.listening);
    finish();
    // Before, the server kept this connection for its 72 s keep-alive: neither settled within the test's timeout.
    await answer.closed;
    await closing;
    expect(answer.text).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer.text).toContain('last');
  });

  // Regression (replays the attack): Node's close() does not count a connection that never sent a request as
  // idle, and stops the headers timeout that would have ended it. One client that connected and said nothing, or
  // half a request, held close() for as long as it stayed: `llmgw control` ignored SIGTERM, and under systemd it
  // was killed before its usage reached the store.
  it('closes connections that sent nothing or half their headers when it closes, while a request in flight ends', async () => {
    const app = createJsonApp({ logger: pino({ level: 'silent' }), bodyLimitBytes: 4096 });
    let finish: () => void = () => {};
    const started = new Promise<void>((began) => {
      app.get('/slow', (_request, reply) => {
        finish = () => void reply.send({ done: true });
        began();
      });
    });
    const port = await listen(app);
    const quiet = await exchange(port, '');
    const half = await exchange(port, 'GET /slow HTTP/1.1\r\nHost: x\r\n');
    const slow = await exchange(port, 'GET /slow HTTP/1.1\r\nHost: x\r\n\r\n');
    await started;
    apps.splice(apps.indexOf(app), 1);
    let closed = false;
    const closing = app.close().then(() => (closed = true));
    await Promise.all([quiet.closed, half.closed]);
    expect(quiet.text + half.text, 'nothing written to them').toBe('');
    expect(closed, 'close() waits for the request in flight').toBe(false);
    finish();
    await closing;
    await slow.closed;
    expect(slow.text).toMatch(/^HTTP\/1\.1 200 /);
    expect(slow.text).toContain('{"done":true}');
  });
});
