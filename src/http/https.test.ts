import { mkdtempSync, readFileSync } from 'node:fs';
import { Server as HttpsServer } from 'node:https';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initTls } from '../tls/init.js';
import { readServerTls } from '../tls/index.js';
import { createJsonApp } from './index.js';

describe('a listener with a certificate', () => {
  let pki = '';
  const closers: (() => Promise<unknown>)[] = [];
  beforeAll(async () => {
    pki = join(mkdtempSync(join(tmpdir(), 'llmgw-https-')), 'pki');
    await initTls({ dir: pki, controlHosts: [], nodes: [], days: 1, force: false });
  });
  afterAll(async () => {
    for (const close of closers) await close();
  });

  it('serves https with the same header timeout a plain listener has, and answers a client that trusts its CA', async () => {
    const https = readServerTls(join(pki, 'control.pem'), join(pki, 'control-key.pem'), {
      cert: 'tls_cert',
      key: 'tls_key',
    });
    const app = createJsonApp({
      logger: pino({ level: 'silent' }),
      bodyLimitBytes: 1024,
      headersTimeoutMs: 2000,
      https,
    });
    app.get('/ping', async () => ({ ok: true }));
    await app.listen({ host: '127.0.0.1', port: 0 });
    closers.push(() => app.close());
    // Fastify gives Node's server only `https` when it is set: the limits must have gone with it, or slow-loris is back.
    expect(app.server).toBeInstanceOf(HttpsServer);
    expect(app.server.headersTimeout, 'the header timeout reached the TLS server').toBe(2000);
    const port = (app.server.address() as { port: number }).port;
    const trusting = new Agent({ connect: { ca: readFileSync(join(pki, 'ca.pem')) } });
    closers.push(() => trusting.close());
    const res = await request(`https://127.0.0.1:${port}/ping`, { dispatcher: trusting });
    expect(await res.body.json()).toEqual({ ok: true });
    await expect(
      request(`https://127.0.0.1:${port}/ping`),
      'a client with only the system CAs refuses it',
    ).rejects.toThrow(/certificate/);
  });

  // Regression: Node's TLS handshake timeout is 120 s, and when it fired the client-error handler wrote
  // a 400 into the unfinished handshake, where it stayed: a silent connection was never closed.
  it('closes a connection that never begins its handshake by the headers timeout, writing nothing to it', async () => {
    const https = readServerTls(join(pki, 'control.pem'), join(pki, 'control-key.pem'), {
      cert: 'tls_cert',
      key: 'tls_key',
    });
    const app = createJsonApp({
      logger: pino({ level: 'silent' }),
      bodyLimitBytes: 1024,
      headersTimeoutMs: 300,
      https,
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    closers.push(() => app.close());
    const socket = connect({ host: '127.0.0.1', port: (app.server.address() as { port: number }).port });
    let received = 0;
    socket.on('data', (chunk: Buffer) => (received += chunk.length)).on('error', () => {});
    // The limit is 300 ms; the wait is only bounded by the test's own timeout.
    await new Promise((resolve) => socket.once('close', resolve));
    expect(received, 'nothing was written into the unfinished handshake').toBe(0);
  });

  it('stays plain HTTP without one', async () => {
    const app = createJsonApp({
      logger: pino({ level: 'silent' }),
      bodyLimitBytes: 1024,
      headersTimeoutMs: 3000,
      https: null,
    });
    expect(app.server).not.toBeInstanceOf(HttpsServer);
    expect(app.server.headersTimeout).toBe(3000);
    await app.close();
  });
});
