import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as connectTls, type TLSSocket } from 'node:tls';
import { Registry } from 'prom-client';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../test/support/wait.js';
import { initTls } from '../tls/init.js';
import { readServerTls, type ServerTls } from '../tls/index.js';
import {
  capConnections,
  connectionCapsFor,
  fitConnectionCaps,
  openFileLimit,
  registerConnectionRefusals,
} from './connections.js';

const sockets: Socket[] = [];
const servers: HttpServer[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

/** A server whose /hold requests are answered only when the test says so; everything else at once. */
async function serve(server: HttpServer): Promise<{ port: number; release: () => void }> {
  const held: ServerResponse[] = [];
  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    if (request.url === '/hold') held.push(response);
    else response.end('ok');
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    release: () => held.splice(0).forEach((r) => r.end('released')),
  };
}

interface Held {
  socket: Socket;
  closed: boolean;
}

function silent(port: number): Promise<Held> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    sockets.push(socket);
    const held = { socket, closed: false };
    socket.on('close', () => (held.closed = true)).on('error', () => {});
    socket.once('connect', () => resolve(held));
  });
}

/** Sends one request and resolves with the answer's text once the server closes. */
function ask(socket: Socket, path: string): Promise<string> {
  return new Promise((resolve) => {
    let text = '';
    socket.setEncoding('utf8').on('data', (c: string) => (text += c));
    socket.on('close', () => resolve(text));
    socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
  });
}

describe('a capped listener', () => {
  // Regression: with no cap, silent connections took every file descriptor (issue #33); with a bare
  // cap they would lock out an honest client until they timed out.
  it('closes the oldest silent connection to make room, so a client that sends a request is answered', async () => {
    const server = createServer();
    let refused = 0;
    const cap = capConnections(server, { maxConnections: 10, onRefused: () => refused++ });
    const { port } = await serve(server);
    const floods: Held[] = [];
    for (let i = 0; i < 30; i++) floods.push(await silent(port));
    await waitFor('the listener at its cap', () => cap.open() <= 10 && refused >= 20);
    const honest = await silent(port);
    expect(await ask(honest.socket, '/'), 'the request after the flood is answered').toMatch(/^HTTP\/1\.1 200 /);
    expect(refused, 'each connection past the cap was counted').toBeGreaterThanOrEqual(21);
    // Oldest first: the first of the flood went before the last.
    expect(floods[0]!.closed, 'the oldest silent connection was closed').toBe(true);
  });

  it('never closes a connection whose request is in flight, and refuses newcomers when every place is busy', async () => {
    const server = createServer();
    let refused = 0;
    const cap = capConnections(server, { maxConnections: 3, onRefused: () => refused++ });
    const { port, release } = await serve(server);
    const busy = await Promise.all([0, 1, 2].map(() => silent(port)));
    const answers = busy.map((b) => ask(b.socket, '/hold'));
    await waitFor('three requests held', () => cap.open() === 3 && cap.idle() === 0);
    for (let i = 0; i < 20; i++) await silent(port);
    await waitFor('the flood refused', () => refused >= 20);
    expect(
      busy.map((b) => b.closed),
      'the held requests kept their connections',
    ).toEqual([false, false, false]);
    release();
    expect(await Promise.all(answers)).toEqual(busy.map(() => expect.stringMatching(/released$/)));
  });

  it('refuses nothing with a cap of 0, and still counts what it holds', async () => {
    const server = createServer();
    const cap = capConnections(server, { maxConnections: 0, onRefused: () => expect.fail('no cap, no refusal') });
    const { port } = await serve(server);
    const held: Held[] = [];
    for (let i = 0; i < 20; i++) held.push(await silent(port));
    expect(server.maxConnections ?? Infinity, "Node's own cap is left unset").toBe(Infinity);
    await waitFor('all twenty counted', () => cap.open() === 20);
    expect(held.some((h) => h.closed)).toBe(false);
  });

  // Regression: Node's close() left a connection that never sent a request open and stopped the header timeout
  // that would have ended it, so one silent client held a listener's close (a plane's shutdown) for good.
  it('closing() closes what has no request in flight, and what arrives after, but not a request in flight', async () => {
    const server = createServer();
    const cap = capConnections(server, { maxConnections: 0 });
    const { port, release } = await serve(server);
    const quiet = await silent(port);
    const halfway = await silent(port);
    halfway.socket.write('GET / HTTP/1.1\r\nHost: x\r\n');
    // Answered and kept alive: idle between requests.
    const kept = await silent(port);
    let between = '';
    kept.socket.setEncoding('utf8').on('data', (c: string) => (between += c));
    kept.socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    await waitFor('the kept connection answered', () => between.endsWith('ok'));
    const busy = await silent(port);
    const held = ask(busy.socket, '/hold');
    await waitFor('four open, one busy', () => cap.open() === 4 && cap.idle() === 3);
    cap.closing();
    await waitFor('the three without a request in flight closed', () => quiet.closed && halfway.closed && kept.closed);
    const late = await silent(port);
    await waitFor('a connection arriving after closing() closed too', () => late.closed);
    expect(busy.closed, 'the request in flight keeps its connection').toBe(false);
    release();
    expect(await held).toMatch(/released$/);
  });

  describe('over TLS', () => {
    let tls: ServerTls;
    let ca: Buffer;
    beforeAll(async () => {
      const pki = join(mkdtempSync(join(tmpdir(), 'llmgw-caps-')), 'pki');
      await initTls({ dir: pki, controlHosts: [], nodes: [], days: 1, force: false });
      tls = readServerTls(join(pki, 'control.pem'), join(pki, 'control-key.pem'), {
        cert: 'tls_cert',
        key: 'tls_key',
      })!;
      ca = readFileSync(join(pki, 'ca.pem'));
    });

    // The request arrives on the TLSSocket, the cap counts the TCP socket under it: if the two were
    // not matched, a held request over TLS would look idle and be closed by the next flood.
    it('keeps a TLS connection whose request is in flight through a flood of silent ones', async () => {
      const server = createHttpsServer({ cert: tls.cert, key: tls.key });
      let refused = 0;
      const cap = capConnections(server as unknown as HttpServer, { maxConnections: 5, onRefused: () => refused++ });
      const { port, release } = await serve(server as unknown as HttpServer);
      const tlsSocket: TLSSocket = connectTls({ host: '127.0.0.1', port, ca });
      sockets.push(tlsSocket);
      let closed = false;
      tlsSocket.on('close', () => (closed = true)).on('error', () => {});
      await new Promise((resolve) => tlsSocket.once('secureConnect', resolve));
      const answer = ask(tlsSocket, '/hold');
      await waitFor('the request held', () => cap.idle() === 0);
      for (let i = 0; i < 20; i++) await silent(port);
      await waitFor('the flood met the cap', () => refused >= 16);
      expect(closed, 'the held TLS connection is still open').toBe(false);
      release();
      expect(await answer).toMatch(/released$/);
    });
  });
});

describe('caps and the open-file limit', () => {
  it('keeps the caps when they fit, and scales the defaults down together when they do not', () => {
    const caps = { client: 4096, admin: 1024, agent: 20_480 };
    expect(fitConnectionCaps(caps, new Set(), 1_048_576)).toEqual({ caps, lowered: false });
    expect(fitConnectionCaps(caps, new Set(), null), 'unknown limit').toEqual({ caps, lowered: false });
    const fitted = fitConnectionCaps(caps, new Set(), 20_000);
    expect(fitted.lowered).toBe(true);
    const sum = fitted.caps.client + fitted.caps.admin + fitted.caps.agent;
    expect(sum, 'they fit, with the reserve left').toBeLessThanOrEqual(20_000 - 2000);
    expect(fitted.caps.agent / fitted.caps.client, 'in proportion').toBeCloseTo(5, 0);
  });

  it('keeps a cap the operator set, and never lowers one below 16 or touches a 0 (no cap)', () => {
    const fitted = fitConnectionCaps({ client: 4096, admin: 0, agent: 20_480 }, new Set(['agent'] as const), 1024);
    expect(fitted.caps.agent, 'as set').toBe(20_480);
    expect(fitted.caps.admin, 'no cap stays no cap').toBe(0);
    expect(fitted.caps.client, 'the floor').toBe(16);
  });

  it('says what it lowered and how to raise it', () => {
    const { caps, note } = connectionCapsFor({ client: 4096, admin: 1024, agent: 20_480, set: [] }, 700);
    expect(caps.client + caps.admin + caps.agent).toBeLessThanOrEqual(700);
    expect(note).toMatch(/open-file limit \(700\): client \d+, admin \d+, agent \d+; raise the limit \(LimitNOFILE/);
    expect(connectionCapsFor({ client: 10, admin: 10, agent: 10, set: [] }, 700).note).toBeNull();
  });

  it('reads the soft limit from /proc/self/limits', () => {
    const limits = (soft: string) => () =>
      `Limit                     Soft Limit           Hard Limit           Units     \nMax open files            ${soft}                 1048576              files     \n`;
    expect(openFileLimit(limits('1024'))).toBe(1024);
    expect(openFileLimit(limits('unlimited'))).toBeNull();
    expect(
      openFileLimit(() => {
        throw new Error('ENOENT');
      }),
    ).toBeNull();
    expect(openFileLimit(), 'this machine has one').toBeGreaterThan(0);
  });

  it('counts refusals per listener, each from 0', async () => {
    const registry = new Registry();
    const refused = registerConnectionRefusals(registry);
    const client = refused('client');
    refused('agent');
    client();
    client();
    const text = await registry.metrics();
    expect(text).toContain('llmgw_listener_connections_refused_total{listener="client"} 2');
    expect(text).toContain('llmgw_listener_connections_refused_total{listener="agent"} 0');
  });
});
