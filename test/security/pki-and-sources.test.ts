// Attack replays for issue #33 (findings 6 and 10) against real processes on
// loopback: the dashboard login sends the browser only to a page on the
// dashboard, whatever `next` says; a node's certificate from `llmgw tls init`
// cannot pose as the control plane to a real agent, which gives up before it
// sends its join token; hf:// names that would carry HF_TOKEN outside a
// repository are refused by the admin API; and an agent does not follow a
// weight server's redirect to an address that reaches this machine.
import { spawnSync } from 'node:child_process';
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ReplicaView } from '../../src/api/index.js';
import { ADMIN, adminHeaders, JOIN } from '../support/fleet.js';
import {
  killEnginesOf,
  type RunningProcess,
  type ControlUrls,
  startControl,
  startLlmgw,
  stopAll,
} from '../support/processes.js';
import { StopWaiting, waitFor } from '../support/wait.js';

const dir = mkdtempSync(join(tmpdir(), 'llmgw-sec-pki-'));
const stateDirs: string[] = [];
const servers: Server[] = [];
let control: RunningProcess & { urls: ControlUrls };

beforeAll(async () => {
  control = await startControl([
    '--store',
    `sqlite:${join(dir, 'llmgw.db')}`,
    '--join-token',
    JOIN,
    '--admin-token',
    ADMIN,
    '--reconcile-interval',
    '300ms',
    '--allow-http-sources',
    '--log-level',
    'info',
  ]);
}, 60_000);

afterAll(async () => {
  await stopAll();
  killEnginesOf(stateDirs);
  for (const s of servers) s.closeAllConnections();
  await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
});

async function listen(server: Server): Promise<number> {
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

describe('the dashboard login', () => {
  // `next=/%09/evil.example/x` answered `Location: /<tab>/evil.example/x`; a browser drops the tab and
  // leaves for //evil.example/x, with the operator just logged in: a phishing page on the admin's own link.
  it('sends the browser only to a page on the dashboard, however next is spelt', async () => {
    const admin = new URL(control.urls.admin);
    const attempts = [
      '/%09/evil.example/x',
      '/\t/x',
      'https://evil.example',
      '/%5c/evil',
      '//x',
      '/\\/evil.example',
      '/%0a/evil.example',
      '/.//evil.example',
    ];
    for (const next of attempts) {
      // The form posts `next` as the login page put it in its hidden field: decoded once, as a browser sends it.
      const value = next.includes('%') ? decodeURIComponent(next) : next;
      const res = await fetch(`${control.urls.admin}/login`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', origin: control.urls.admin },
        body: new URLSearchParams({ token: ADMIN, next: value }).toString(),
      });
      expect(res.status, `${JSON.stringify(next)}: the login succeeded`).toBe(303);
      const location = res.headers.get('location') ?? '';
      // WHATWG URL drops tabs and newlines and reads `\` as `/` exactly as a browser does.
      const lands = new URL(location, admin);
      expect(lands.origin, `${JSON.stringify(next)} sent the browser to ${JSON.stringify(location)}`).toBe(
        admin.origin,
      );
      expect(location, `${JSON.stringify(next)}: the dashboard's home instead`).toBe('/');
    }
    // A path on the dashboard itself still works.
    const ok = await fetch(`${control.urls.admin}/login`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: control.urls.admin },
      body: new URLSearchParams({ token: ADMIN, next: '/nodes?x=1' }).toString(),
    });
    expect(ok.headers.get('location'), 'a local path is kept').toBe('/nodes?x=1');
  });
});

describe("a node's certificate", () => {
  const pki = join(dir, 'pki');
  const openssl = (...args: string[]) => {
    const run = spawnSync('openssl', args, { encoding: 'utf8' });
    expect(run.status, `openssl ${args.join(' ')}: ${run.stderr}`).toBe(0);
  };

  /** An https server on loopback that records every request it is sent (a join carries the token in its body). */
  async function impostor(
    cert: string,
    key: string,
  ): Promise<{ url: string; requests: string[]; handshakes: () => number }> {
    const requests: string[] = [];
    let handshakes = 0;
    const server = createHttpsServer({ cert: readFileSync(cert), key: readFileSync(key) }, (req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString('utf8')));
      req.on('end', () => {
        requests.push(`${req.method} ${req.url} ${body}`);
        res.writeHead(503).end();
      });
    });
    server.on('tlsClientError', () => handshakes++);
    server.on('secureConnection', () => handshakes++);
    const port = await listen(server);
    return { url: `https://127.0.0.1:${port}`, requests, handshakes: () => handshakes };
  }

  /** Starts a real agent that trusts pki/ca.pem against `url`, and waits for two refused joins. */
  async function agentRefuses(url: string, id: string, why: RegExp): Promise<Record<string, unknown>> {
    const stateDir = join(dir, id);
    stateDirs.push(stateDir);
    const agent = startLlmgw([
      'agent',
      '--control',
      url,
      '--ca',
      join(pki, 'ca.pem'),
      '--join-token',
      JOIN,
      '--node-id',
      id,
      '--state-dir',
      stateDir,
      '--simulate',
      'gpus=0,ram=16g',
      '--heartbeat-interval',
      '300ms',
      '--port-range',
      '31900-31909',
      '--log-level',
      'warn',
    ]);
    let attempts = 0;
    const refused = await agent.waitForLog(
      (e) => e.msg === 'cannot join yet; retrying' && why.test(`${String(e.err)} ${String(e.hint)}`) && ++attempts >= 2,
    );
    await agent.stop();
    return refused;
  }

  beforeAll(async () => {
    const made = startLlmgw(['tls', 'init', pki, '--name', 'n1']);
    const { code } = await made.exited;
    expect(code, `tls init: ${made.stderr()}`).toBe(0);
  }, 60_000);

  // `llmgw tls init` signed node certificates with the CA agents trust for the control plane, with serverAuth and
  // loopback names: anyone holding one node's key could answer on 127.0.0.1 as the control plane, and an agent
  // started with --control https://127.0.0.1:PORT --ca ca.pem handed it its join token.
  it('is refused by a real agent as its control plane on loopback, before the join token is sent', async () => {
    const fake = await impostor(join(pki, 'node-n1.pem'), join(pki, 'node-n1-key.pem'));
    const refused = await agentRefuses(fake.url, 'victim', /does not name the host|altnames|not a control plane/i);
    expect(fake.handshakes(), 'the agent did reach the impostor').toBeGreaterThan(0);
    expect(fake.requests, 'no request, so no join token, reached the impostor').toEqual([]);
    expect(String(refused.hint), 'the log says what is wrong').toMatch(/does not name the host|not a control plane's/);
  }, 60_000);

  // The name is not the only line: a certificate from the node CA that names loopback (as every node certificate
  // did before, or one an operator made by hand) still does not pass for the control plane.
  it("is refused as the control plane even where it names the agent's --control host", async () => {
    const key = join(dir, 'posing-key.pem');
    const csr = join(dir, 'posing.csr');
    const cert = join(dir, 'posing.pem');
    writeFileSync(
      join(dir, 'posing.ext'),
      'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n',
    );
    openssl('genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', key);
    openssl('req', '-new', '-key', key, '-subj', '/CN=n1/O=llmgw', '-out', csr);
    openssl(
      'x509',
      '-req',
      '-in',
      csr,
      '-CA',
      join(pki, 'node-ca.pem'),
      '-CAkey',
      join(pki, 'node-ca-key.pem'),
      '-set_serial',
      '7',
      '-days',
      '1',
      '-extfile',
      join(dir, 'posing.ext'),
      '-out',
      cert,
    );
    writeFileSync(cert, `${readFileSync(cert, 'utf8')}${readFileSync(join(pki, 'node-ca.pem'), 'utf8')}`);
    const chain = spawnSync(
      'openssl',
      ['verify', '-CAfile', join(pki, 'ca.pem'), '-untrusted', join(pki, 'node-ca.pem'), cert],
      { encoding: 'utf8' },
    );
    expect(
      chain.status,
      `the posing certificate chains to the root the agent trusts: ${chain.stdout}${chain.stderr}`,
    ).toBe(0);

    const fake = await impostor(cert, key);
    const refused = await agentRefuses(fake.url, 'victim2', /not a control plane/i);
    expect(fake.handshakes(), 'the agent did reach the impostor').toBeGreaterThan(0);
    expect(fake.requests, 'no request, so no join token, reached the impostor').toEqual([]);
    expect(String(refused.hint)).toMatch(/issued by CN=llmgw node CA.*not directly by a CA in --ca/);
  }, 60_000);
});

describe('weight sources', () => {
  // A weight server answered 302 to an address inside the agent's network and the agent followed it. 0.0.0.0
  // reaches this machine's own listeners, here the weight server itself: before the fix the replica got its bytes.
  // (Private and link-local hops cannot be served on loopback; src/agent/fetch/redirects.test.ts replays them
  // with an injected resolver.)
  it("an agent's fetch does not follow a redirect to an address that reaches this machine", async () => {
    const weights = Buffer.alloc(4096, 7);
    const server = createHttpServer((req, res) => {
      if (req.url === '/weights.gguf') {
        res.writeHead(302, { location: `http://0.0.0.0:${port}/real.gguf` }).end();
        return;
      }
      res.writeHead(200, { 'content-length': String(weights.length) }).end(weights);
    });
    const port = await listen(server);
    const stateDir = join(dir, 'f1');
    stateDirs.push(stateDir);
    startLlmgw([
      'agent',
      '--control',
      control.urls.agent,
      '--join-token',
      JOIN,
      '--node-id',
      'f1',
      '--state-dir',
      stateDir,
      '--simulate',
      'gpus=0,ram=16g',
      '--heartbeat-interval',
      '300ms',
      '--port-range',
      '31910-31929',
      '--allow-http-sources',
      '--log-level',
      'warn',
    ]);
    await waitFor(
      'f1 up',
      async () =>
        (
          (await (await fetch(`${control.urls.admin}/api/v1/nodes`, { headers: adminHeaders })).json()) as {
            id: string;
          }[]
        ).some((n) => n.id === 'f1') || undefined,
    );
    const added = await fetch(`${control.urls.admin}/api/v1/models`, {
      method: 'POST',
      headers: adminHeaders,
      body: JSON.stringify({
        name: 'redirected',
        source: `http://127.0.0.1:${port}/weights.gguf`,
        profiles: [{ engine: 'sim' }],
      }),
    });
    expect(added.status, await added.clone().text()).toBe(200);
    const failed = await waitFor(
      'the replica failed with the reason',
      async () => {
        const [r] = (await (
          await fetch(`${control.urls.admin}/api/v1/replicas?model=redirected`, { headers: adminHeaders })
        ).json()) as ReplicaView[];
        if (r?.state === 'ready')
          throw new StopWaiting(
            'the replica became ready: the agent followed the redirect to 0.0.0.0 and got the bytes',
          );
        return r?.state === 'failed' && r.error ? r : undefined;
      },
      60_000,
    );
    expect(failed.error).toMatch(
      /redirected to http:\/\/0\.0\.0\.0:\d+, which reaches 0\.0\.0\.0, an unspecified address/,
    );
  }, 90_000);

  // hf://../../x was accepted and @huggingface/hub put the names into hub URLs unescaped, with HF_TOKEN attached:
  // the token went to hub paths outside /api/models/org/name. Run with a node up (the test above starts f1), so that
  // nothing but the source itself can be the reason for a refusal.
  it('refuses hf:// names that leave a repository, with 400 and what is wrong, adding nothing', async () => {
    const before = await (await fetch(`${control.urls.admin}/api/v1/models`, { headers: adminHeaders })).text();
    const refused: [string, RegExp][] = [
      ['hf://../../x', /organisation "\.\." is not a hub name/],
      ['hf://org/..', /repository name "\.\." is not a hub name/],
      ['hf://org/repo/%2e%2e/%2e%2e/x', /"\.\." path segment/],
      ['hf://org/repo/a%2f..%2fb', /escaped separator/],
      ['hf://org/repo/a\\..\\b', /backslash/],
      ['hf://org/repo@..%2F..', /revision has an empty, "\." or "\.\." segment/],
      ['hf://org/repo//x', /empty/],
    ];
    for (const [source, why] of refused) {
      const res = await fetch(`${control.urls.admin}/api/v1/models`, {
        method: 'POST',
        headers: adminHeaders,
        body: JSON.stringify({ name: 'escape', source, profiles: [{ engine: 'sim' }] }),
      });
      const text = await res.text();
      expect(res.status, `${source}: ${text}`).toBe(400);
      expect((JSON.parse(text) as { error: string }).error, source).toMatch(why);
    }
    expect(
      await (await fetch(`${control.urls.admin}/api/v1/models`, { headers: adminHeaders })).text(),
      'no model was added',
    ).toBe(before);
  });
});
