import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initTls } from './init.js';
import { Agent } from 'undici';
import {
  certificateProblem,
  controlPlaneConnect,
  dispatcherForCa,
  engineDispatcher,
  isPlainHttpOffLoopback,
  peerClient,
  readCa,
} from './index.js';

describe('isPlainHttpOffLoopback', () => {
  it('is true only for http:// to another machine', () => {
    expect(isPlainHttpOffLoopback('http://10.0.0.1:8082')).toBe(true);
    expect(isPlainHttpOffLoopback('http://control.example:8082')).toBe(true);
    expect(isPlainHttpOffLoopback('http://[fe80::1]:8082')).toBe(true);
    for (const url of [
      'http://127.0.0.1:8082',
      'http://127.1.2.3:1',
      'http://localhost:8082',
      'http://[::1]:8082',
      'https://10.0.0.1:8082',
    ]) {
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
    await initTls({
      dir: pki,
      controlHosts: [],
      nodes: [
        { name: 'n1', hosts: [] },
        { name: 'n2', hosts: [] },
      ],
      days: 1,
      force: false,
    });
  });
  afterAll(() => {
    for (const s of servers) s.close();
  });

  it('trust the CA they are given, and a failed check says which flag to set', async () => {
    const port = await listen(
      createHttpsServer(
        { cert: readFileSync(join(pki, 'control.pem')), key: readFileSync(join(pki, 'control-key.pem')) },
        (_req, res) => res.end('ok'),
      ),
    );
    const dispatcher = dispatcherForCa(readCa(join(pki, 'ca.pem'), '--ca'))!;
    const res = await request(`https://127.0.0.1:${port}/`, { dispatcher });
    expect(await res.body.text()).toBe('ok');
    expect(peerClient(readFileSync(join(pki, 'ca.pem'))).scheme).toBe('https');
    expect(peerClient(null).scheme, 'no CA = plain http').toBe('http');
    expect(peerClient(null).dispatcherFor('n1'), 'plain http: the global dispatcher').toBeUndefined();
    const err = await request(`https://127.0.0.1:${port}/`).catch((e: unknown) => e);
    expect(certificateProblem(err, '--ca')).toMatch(/not signed by a CA this process trusts .*give --ca the ca\.pem/);
  });

  it('says when the server does not speak TLS at all, and stays silent on other failures', async () => {
    const port = await listen(createHttpServer((_req, res) => res.end('plain')));
    const err = await request(`https://127.0.0.1:${port}/`).catch((e: unknown) => e);
    expect(certificateProblem(err, 'agent_ca')).toMatch(/does not speak TLS on that port/);
    expect(certificateProblem(new Error('connect ECONNREFUSED'), '--ca')).toBeNull();
  });

  const serve = (name: string) =>
    listen(
      createHttpsServer(
        { cert: readFileSync(join(pki, `${name}.pem`)), key: readFileSync(join(pki, `${name}-key.pem`)) },
        (_req, res) => res.end(name),
      ),
    );

  // A node's certificate was signed by the CA agents trust for the control plane, with serverAuth and loopback
  // names: a node's key on loopback passed for the control plane, and an agent handed it its join token.
  it("an agent accepts as its control plane only a certificate the CA issued directly, never a node's", async () => {
    const ca = readFileSync(join(pki, 'ca.pem'));
    const agent = new Agent({ connect: controlPlaneConnect(ca)! });
    try {
      const control = await serve('control');
      expect(
        await (await request(`https://127.0.0.1:${control}/`, { dispatcher: agent })).body.text(),
        'the control plane passes',
      ).toBe('control');
      const node = await serve('node-n1');
      // Named as the node's own name would be, so only the issuer check can refuse it.
      const posing = new Agent({ connect: { ...controlPlaneConnect(ca)!, servername: 'n1' } });
      try {
        const err = await request(`https://127.0.0.1:${node}/`, { dispatcher: posing }).catch((e: unknown) => e);
        expect(err, 'a node certificate is refused even for its own name').toBeInstanceOf(Error);
        expect(certificateProblem(err, '--ca')).toMatch(/not a control plane's .*issued by CN=llmgw node CA/);
        const plain = await request(`https://n1:${node}/`, {
          dispatcher: new Agent({
            connect: { ca, lookup: (_h, _o, cb) => cb(null, [{ address: '127.0.0.1', family: 4 }]) },
          }),
        }).catch((e: unknown) => e);
        expect(
          plain instanceof Error ? plain.message : 'answered',
          'without the issuer check the chain itself verifies: the check is what refuses it',
        ).toBe('answered');
      } finally {
        await posing.close();
      }
    } finally {
      await agent.close();
    }
  });

  it("the control plane knows a node by its node id wherever it dials it, and one node's certificate is not another's", async () => {
    const peer = peerClient(readFileSync(join(pki, 'ca.pem')));
    const node = await serve('node-n1');
    const res = await request(`https://127.0.0.1:${node}/`, { dispatcher: peer.dispatcherFor('n1') });
    expect(await res.body.text(), 'n1 on loopback, which its certificate does not name').toBe('node-n1');
    const err = await request(`https://127.0.0.1:${node}/`, { dispatcher: peer.dispatcherFor('n2') }).catch(
      (e: unknown) => e,
    );
    expect(certificateProblem(err, 'agent_ca'), "n1's certificate does not answer for n2").toMatch(
      /does not name the host/,
    );
  });

  it("an agent's engines pass its probes on loopback with the node's own certificate, and no other", async () => {
    const ca = readFileSync(join(pki, 'ca.pem'));
    const engine = await serve('node-n1');
    const own = engineDispatcher(ca, readFileSync(join(pki, 'node-n1.pem')))!;
    expect(await (await request(`https://127.0.0.1:${engine}/`, { dispatcher: own })).body.text()).toBe('node-n1');
    const other = engineDispatcher(ca, readFileSync(join(pki, 'node-n2.pem')))!;
    const err = await request(`https://127.0.0.1:${engine}/`, { dispatcher: other }).catch((e: unknown) => e);
    expect(certificateProblem(err, '--ca'), "n2's agent does not take n1's certificate for its engine").toMatch(
      /does not name the host/,
    );
  });
});
