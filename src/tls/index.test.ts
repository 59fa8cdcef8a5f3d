import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initTls } from './init.js';
import { certificateProblem, dispatcherForCa, isPlainHttpOffLoopback, peerClient, readCa } from './index.js';

describe('isPlainHttpOffLoopback', () => {
  it('is true only for http:// to another machine', () => {
    expect(isPlainHttpOffLoopback('http://10.0.0.1:8082')).toBe(true);
    expect(isPlainHttpOffLoopback('http://control.example:8082')).toBe(true);
    expect(isPlainHttpOffLoopback('http://[fe80::1]:8082')).toBe(true);
    for (const url of ['http://127.0.0.1:8082', 'http://127.1.2.3:1', 'http://localhost:8082', 'http://[::1]:8082', 'https://10.0.0.1:8082']) {
      expect(isPlainHttpOffLoopback(url), url).toBe(false);
    }
  });
});

describe('clients of a TLS server', () => {
  let pki = '';
  const servers: Server[] = [];
  const listen = async (server: Server) => {
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return (server.address() as AddressInfo).port;
  };
  beforeAll(async () => {
    pki = join(mkdtempSync(join(tmpdir(), 'llmgw-tls-client-')), 'pki');
    await initTls({ dir: pki, controlHosts: [], nodes: [], days: 1, force: false });
  });
  afterAll(() => {
    for (const s of servers) s.close();
  });

  it('trust the CA they are given, and a failed check says which flag to set', async () => {
    const port = await listen(createHttpsServer({ cert: readFileSync(join(pki, 'control.pem')), key: readFileSync(join(pki, 'control-key.pem')) }, (_req, res) => res.end('ok')));
    const dispatcher = dispatcherForCa(readCa(join(pki, 'ca.pem'), '--ca'))!;
    const res = await request(`https://127.0.0.1:${port}/`, { dispatcher });
    expect(await res.body.text()).toBe('ok');
    expect(peerClient(readFileSync(join(pki, 'ca.pem'))).scheme).toBe('https');
    expect(peerClient(null), 'no CA = plain http').toEqual({ scheme: 'http', dispatcher: undefined });
    const err = await request(`https://127.0.0.1:${port}/`).catch((e: unknown) => e);
    expect(certificateProblem(err, '--ca')).toMatch(/not signed by a CA this process trusts .*give --ca the ca\.pem/);
  });

  it('says when the server does not speak TLS at all, and stays silent on other failures', async () => {
    const port = await listen(createHttpServer((_req, res) => res.end('plain')));
    const err = await request(`https://127.0.0.1:${port}/`).catch((e: unknown) => e);
    expect(certificateProblem(err, 'agent_ca')).toMatch(/does not speak TLS on that port/);
    expect(certificateProblem(new Error('connect ECONNREFUSED'), '--ca')).toBeNull();
  });
});
