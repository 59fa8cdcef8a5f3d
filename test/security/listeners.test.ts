// Attacks on the listeners themselves, replayed against a real `llmgw control`
// serving TLS on loopback (issue #33): TCP connections that never start or
// never finish their TLS handshake used to stay open for good (20 were all
// open after 150 s; the client-error handler wrote a 400 into each once the
// 120 s handshake timeout fired, and that write never left), so 1,100 of them
// exhausted the process's file descriptors and every listener failed; the
// client listener cut a stalled body with no answer; and two Host headers or
// an absolute-form target naming another authority passed the Host check.
import { mkdtempSync, readFileSync } from 'node:fs';
import { connect as connectTcp, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as connectTls } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN, JOIN, startSimAgent } from '../support/fleet.js';
import { type ControlUrls, type RunningProcess, startControl, startLlmgw, stopAll } from '../support/processes.js';
import { type RawAnswer, rawExchange } from '../support/raw-http.js';
import { waitFor } from '../support/wait.js';

const dir = mkdtempSync(join(tmpdir(), 'llmgw-sec-listeners-'));
const pki = join(dir, 'pki');
let ca: Buffer;
const opened: Socket[] = [];

afterAll(async () => {
  for (const s of opened) s.destroy();
  await stopAll();
});

beforeAll(async () => {
  const made = startLlmgw(['tls', 'init', pki]);
  const { code } = await made.exited;
  expect(code, `tls init failed: ${made.stderr()}`).toBe(0);
  ca = readFileSync(join(pki, 'ca.pem'));
}, 60_000);

const tlsArgs = () => ['--tls-cert', join(pki, 'control.pem'), '--tls-key', join(pki, 'control-key.pem')];

/** A control plane serving TLS, on a SQLite file of its own in the test's directory, with `extra` flags. */
function tlsControl(db: string, extra: string[] = [], options: Parameters<typeof startControl>[1] = {}) {
  return startControl(
    [
      '--store',
      `sqlite:${join(dir, db)}`,
      '--admin-token',
      ADMIN,
      '--join-token',
      JOIN,
      '--log-level',
      'info',
      ...extra,
      ...tlsArgs(),
    ],
    options,
  );
}

/** A TCP connection the test holds open; it records whether the server closed it and what, if anything, it wrote. */
interface Held {
  socket: Socket;
  received: number;
  closed: boolean;
}

function hold(url: string): Promise<Held> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connectTcp({ host: hostname, port: Number(port) });
    opened.push(socket);
    const held: Held = { socket, received: 0, closed: false };
    socket.on('data', (chunk: Buffer) => (held.received += chunk.length));
    socket.on('close', () => (held.closed = true));
    socket.on('error', () => {});
    socket.once('connect', () => resolve(held));
    socket.once('error', reject);
  });
}

/** The first flight of a real TLS client (its ClientHello), caught by a plain TCP server. */
async function clientHello(): Promise<Buffer> {
  return new Promise((resolve) => {
    const catcher = createServer((s) =>
      s.once('data', (d: Buffer) => {
        resolve(d);
        s.destroy();
        catcher.close();
      }),
    );
    catcher.listen(0, '127.0.0.1', () => {
      const c = connectTls({
        host: '127.0.0.1',
        port: (catcher.address() as { port: number }).port,
        rejectUnauthorized: false,
      });
      c.on('error', () => {});
    });
  });
}

/** Sends `request` over TLS, trusting the test's CA, and reads the answer until the server closes. */
function overTls(url: string, request: string): Promise<RawAnswer> {
  return rawExchange(url, request, { ca });
}

describe('a TLS control plane with short timeouts', () => {
  let control: RunningProcess & { urls: ControlUrls };

  beforeAll(async () => {
    control = await tlsControl('short.db', ['--client-headers-timeout', '1s', '--idle-body-timeout', '1s']);
  }, 60_000);

  // Attack: connections that send nothing, or half a ClientHello, were never closed (the handshake
  // timeout was Node's 120 s, then a 400 was written into the unfinished handshake and stuck there).
  it('closes connections that never start or never finish their TLS handshake on every listener, writing nothing into them', async () => {
    const hello = await clientHello();
    const held: { listener: string; kind: string; h: Held }[] = [];
    for (const [listener, url] of Object.entries(control.urls)) {
      for (let i = 0; i < 5; i++) held.push({ listener, kind: 'silent', h: await hold(url) });
      for (let i = 0; i < 5; i++) {
        const h = await hold(url);
        h.socket.write(hello.subarray(0, Math.floor(hello.length / 2)));
        held.push({ listener, kind: 'half a ClientHello', h });
      }
    }
    // The limit is the 1 s headers timeout; 20 s is only the test's patience.
    await waitFor(
      () =>
        `every held connection closed by the server; still open: ${held
          .filter((x) => !x.h.closed)
          .map((x) => `${x.listener} (${x.kind})`)
          .join(', ')}`,
      () => held.every((x) => x.h.closed),
      20_000,
    );
    for (const x of held)
      expect(x.h.received, `${x.listener} (${x.kind}): nothing is written into an unfinished handshake`).toBe(0);
    // The listeners still serve a client that completes its handshake.
    const ok = await overTls(
      control.urls.admin,
      `GET /api/v1/summary HTTP/1.1\r\nHost: ${new URL(control.urls.admin).host}\r\nAuthorization: Bearer ${ADMIN}\r\nConnection: close\r\n\r\n`,
    );
    expect(ok.status, ok.head).toBe(200);
  });

  // Attack: a client that starts a body and stalls had its connection cut with no answer on the client
  // listener, so an honest but slow client could not tell a timeout from a crash.
  it("answers a stalled body on the client listener with 408 in OpenAI's error shape", async () => {
    // With a key: a request without one is refused with 401 as soon as its headers are in, body or not.
    const adminHost = new URL(control.urls.admin).host;
    const def = '{"name":"staller"}';
    const made = await overTls(
      control.urls.admin,
      `POST /api/v1/keys HTTP/1.1\r\nHost: ${adminHost}\r\nAuthorization: Bearer ${ADMIN}\r\nContent-Type: application/json\r\nContent-Length: ${def.length}\r\nConnection: close\r\n\r\n${def}`,
    );
    expect(made.status, made.body).toBe(201);
    const key = (JSON.parse(made.body) as { secret: string }).secret;
    const host = new URL(control.urls.client).host;
    const answer = await overTls(
      control.urls.client,
      `POST /v1/chat/completions HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"model":`,
    );
    expect(answer.status, `the answer: ${answer.head}`).toBe(408);
    expect(answer.head.toLowerCase(), 'the connection is closed after it').toContain('connection: close');
    const body = JSON.parse(answer.body) as { error: { message: string; type: string; llmgw_code: string } };
    expect(body.error.llmgw_code).toBe('LLMGW_REQUEST_TIMEOUT');
    expect(body.error.type).toBe('invalid_request_error');
    expect(body.error.message).toMatch(/took too long/);
    expect(
      control.lines.filter((l) => l.includes('already sent')),
      'the 408 is the only answer Fastify tried to send',
    ).toEqual([]);
  });

  // Attack: Host checks read only the first Host header and ignored an absolute-form target, so
  // `Host: 127.0.0.1` twice with another name, or `GET http://evil.example/...`, reached the API under a
  // name the listener does not answer to (what a rebound DNS name or a confused proxy sends).
  it('refuses two Host headers, and an absolute-form target naming another authority, on the admin listener', async () => {
    const own = new URL(control.urls.admin).host;
    const auth = `Authorization: Bearer ${ADMIN}\r\nConnection: close\r\n`;
    const keyCount = async () => {
      const listed = await overTls(control.urls.admin, `GET /api/v1/keys HTTP/1.1\r\nHost: ${own}\r\n${auth}\r\n`);
      expect(listed.status, listed.body).toBe(200);
      return (JSON.parse(listed.body) as { keys: unknown[] }).keys.length;
    };
    const before = await keyCount();
    const post = (target: string, hosts: string[]) =>
      overTls(
        control.urls.admin,
        `POST ${target} HTTP/1.1\r\n${hosts.map((h) => `Host: ${h}\r\n`).join('')}${auth}Content-Type: application/json\r\nContent-Length: 13\r\n\r\n{"name":"in"}`,
      );
    for (const [target, hosts] of [
      ['/api/v1/keys', [own, 'evil.example']],
      ['/api/v1/keys', ['evil.example', own]],
      ['/api/v1/keys', [own, own]],
      ['https://evil.example/api/v1/keys', [own]],
      [`https://evil.example:${new URL(control.urls.admin).port}/api/v1/keys`, [own]],
      ['http://127.0.0.1.evil.example/api/v1/keys', [own]],
    ] as const) {
      const answer = await post(target, [...hosts]);
      expect(
        [400, 421],
        `POST ${target} with Host ${hosts.join(' + ')}: ${answer.head.split('\r\n')[0]} ${answer.body}`,
      ).toContain(answer.status);
    }
    expect(await keyCount(), 'no key was made').toBe(before);
    // Its own authority in absolute form still works: the check is on the name, not the form.
    const absolute = await overTls(
      control.urls.admin,
      `GET https://${own}/api/v1/keys HTTP/1.1\r\nHost: ${own}\r\n${auth}\r\n`,
    );
    expect(absolute.status, absolute.body).toBe(200);
  });
});

describe('a TLS control plane with few file descriptors', () => {
  let control: RunningProcess & { urls: ControlUrls };

  beforeAll(async () => {
    // 700 open files for the whole process: 800 silent connections would take them all without a cap.
    control = await tlsControl('few.db', [], { prefix: ['prlimit', '--nofile=700:700', '--'] });
  }, 60_000);

  // Attack: 1,100 silent TCP connections exhausted the process's file descriptors and every listener
  // failed until the client let go. With the header timeout left at its 30 s, they stay while this runs.
  it('800 silent connections to the client listener leave it and the admin listener answering, and the refusals are counted', async () => {
    const held: Held[] = [];
    for (let i = 0; i < 800; i++) held.push(await hold(control.urls.client));
    const host = new URL(control.urls.client).host;
    const health = await overTls(
      control.urls.client,
      `GET /healthz HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`,
    );
    expect(health.status, `the client listener still answers: ${health.head}`).toBe(200);
    const adminHost = new URL(control.urls.admin).host;
    const metrics = await overTls(
      control.urls.admin,
      `GET /metrics HTTP/1.1\r\nHost: ${adminHost}\r\nAuthorization: Bearer ${ADMIN}\r\nConnection: close\r\n\r\n`,
    );
    expect(metrics.status, `the admin listener still answers: ${metrics.head}`).toBe(200);
    const refused = /^llmgw_listener_connections_refused_total\{listener="client"\} (\d+)$/m.exec(metrics.body);
    expect(refused, 'the refused-connections metric is there').not.toBeNull();
    expect(Number(refused![1]), 'connections past the cap were refused and counted').toBeGreaterThan(0);
    expect(held.filter((h) => h.closed).length, 'the cap closed some of the silent connections').toBeGreaterThan(0);
    const warned = control.lines.find((l) => l.includes('open-file limit'));
    expect(warned, 'the start-up log says the caps were fitted to the open-file limit').toBeDefined();
  });
});

/**
 * A simulated agent `id` (ports from `firstPort`, ten of them) joined to a control plane of its own with no store,
 * started under `prefix` if given; logging at info, whose start-up line names its management listener.
 */
async function simAgent(id: string, firstPort: number, prefix?: readonly string[]) {
  const control = await startControl(['--store', 'none', '--join-token', JOIN, '--log-level', 'warn']);
  const agent = startSimAgent(
    control.urls.agent,
    join(dir, `${id}-agent`),
    id,
    { first: firstPort, count: 10 },
    {
      logLevel: 'info',
      ...(prefix ? { prefix } : {}),
    },
  );
  const running = await agent.waitForLog((e) => e.msg === 'llmgw agent running');
  return { control, agent, mgmt: running.mgmt as string };
}

/** Heartbeats the control plane at `admin` has received, of either kind (llmgw_heartbeat_reports_total). */
async function heartbeatsAt(admin: string): Promise<number> {
  const text = await (await fetch(`${admin}/metrics`)).text();
  const counts = [...text.matchAll(/^llmgw_heartbeat_reports_total\{kind="\w+"\} (\d+)$/gm)];
  if (counts.length === 0) throw new Error(`${admin}/metrics has no llmgw_heartbeat_reports_total`);
  return counts.reduce((sum, m) => sum + Number(m[1]), 0);
}

describe('an agent with few file descriptors', () => {
  // Attack: the agent's management listener, reachable from the network so that its control plane can call it, had
  // no connection cap: silent connections took file descriptors until none was left for new connections, to the
  // listener or from it. At its cap (68 connections for 200 files) the oldest silent one makes room instead.
  it('300 silent connections to its management listener leave it answering and the node reporting', async () => {
    const { control, agent, mgmt } = await simAgent('few-files', 27960, ['prlimit', '--nofile=200:200', '--']);
    const held: Held[] = [];
    for (let i = 0; i < 300; i++) held.push(await hold(mgmt));
    await waitFor(
      () => `the cap closed all but 68 of the 300; open: ${held.filter((h) => !h.closed).length}`,
      () => held.filter((h) => !h.closed).length <= 68,
    );
    const warned = await agent.waitForLog((e) => String(e.msg).includes('management listener at its connection cap'));
    expect(warned.max_connections, 'the cap fits 200 open files').toBe(68);
    const host = new URL(mgmt).host;
    const answer = await rawExchange(
      mgmt,
      `GET /mgmt/v1/health HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`,
    );
    expect(answer.status, `the listener still answers, and without the token refuses: ${answer.head}`).toBe(401);
    expect(JSON.parse(answer.body)).toEqual({ error: "only this node's control plane may call its management API" });
    // The node still reaches its control plane: heartbeats arrive after the flood (the control plane's count grows).
    const after = await heartbeatsAt(control.urls.admin);
    await waitFor('a heartbeat after the flood', async () => (await heartbeatsAt(control.urls.admin)) > after);
    expect(agent.lines.join('\n')).not.toMatch(/EMFILE/);
    for (const h of held) h.socket.destroy();
  });
});

/** SIGTERM, and how the process ended; 'still running' after 20 s (the test's patience, not a limit of llmgw's). */
function stopOnSigterm(
  proc: RunningProcess,
): Promise<{ code: number | null; signal: NodeJS.Signals | null } | 'still running'> {
  return Promise.race([
    proc.stop('SIGTERM'),
    new Promise<'still running'>((resolve) => setTimeout(() => resolve('still running'), 20_000).unref()),
  ]);
}

describe('a TLS control plane stopping', () => {
  // Attack: one client that connected and sent nothing (or half a ClientHello) held the listener's close for as long
  // as it stayed, because Node's close() leaves such a connection open and stops the headers timeout that would have
  // ended it: `llmgw control` ignored SIGTERM, and under systemd it was killed before its usage reached the store.
  it('stops on SIGTERM while silent and half-handshaken connections are held open on every listener', async () => {
    const control = await tlsControl('stopping.db');
    const hello = await clientHello();
    const held: { listener: string; kind: string; h: Held }[] = [];
    for (const [listener, url] of Object.entries(control.urls)) {
      held.push({ listener, kind: 'silent', h: await hold(url) });
      const half = await hold(url);
      half.socket.write(hello.subarray(0, Math.floor(hello.length / 2)));
      held.push({ listener, kind: 'half a ClientHello', h: half });
    }
    // The headers timeout is its default 30 s: nothing closes these connections before the stop but the stop.
    expect(await stopOnSigterm(control), 'SIGTERM stops the control plane, whatever its clients hold open').toEqual({
      code: 0,
      signal: null,
    });
    await waitFor(
      () => `every held connection closed; still open: ${held.filter((x) => !x.h.closed).map((x) => x.listener)}`,
      () => held.every((x) => x.h.closed),
    );
    for (const x of held) expect(x.h.received, `${x.listener} (${x.kind}): nothing written`).toBe(0);
  });

  // The same attack on an agent's management listener, which the control plane calls across the network: `llmgw
  // agent` (and `llmgw up`, which stops its agent first) ignored SIGTERM while the connection stayed.
  it('stops an agent on SIGTERM while a silent connection is held on its management listener', async () => {
    const { agent, mgmt } = await simAgent('stopping', 27950);
    const silent = await hold(mgmt);
    expect(await stopOnSigterm(agent), 'SIGTERM stops the agent, whatever is held open on its listener').toEqual({
      code: 0,
      signal: null,
    });
    await waitFor('the silent connection closed', () => silent.closed);
    expect(silent.received).toBe(0);
  });
});
