// An upload that stalls the control plane, replayed against a real `llmgw
// control` with a simulated agent on loopback. The attack (issue #33, finding
// 4): POST /v1/audio/transcriptions with 200,000 one-byte form fields and a
// 12 MB file part, within the 25 MiB upload limit. The router buffered the
// whole body and then parsed it in one synchronous call: every listener,
// heartbeats included, stopped answering for 5.7 s per upload, and ten at
// once took the fleet's heartbeats past their deadline. Now the form is
// parsed as it arrives, with limits a model call never reaches, so the
// upload is refused after its 65th field while the rest is still on its way.
import { mkdirSync, mkdtempSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ReplicaView } from '../../src/api/index.js';
import { killEnginesOf, startControl, startLlmgw, stopAll } from '../support/processes.js';
import { waitFor } from '../support/wait.js';

const JOIN = 'sec-join-token-uploads-0123456789a';
const ADMIN = 'sec-admin-token-uploads-012345678';
const admin = { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json', 'x-llmgw-actor': 'sec-uploads' };

let adminUrl = '';
let clientUrl = '';
let key = '';
const stateDirs: string[] = [];

async function api<T>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
  const res = await fetch(`${adminUrl}${path}`, {
    method,
    headers: admin,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as T };
}

/** Heartbeats the control plane has taken so far (keep-alives and full reports), from its /metrics. */
async function heartbeatsTaken(): Promise<number> {
  const text = await (await fetch(`${adminUrl}/metrics`, { headers: admin })).text();
  return text
    .split('\n')
    .filter((l) => l.startsWith('llmgw_heartbeat_reports_total{'))
    .reduce((sum, l) => sum + Number(l.split(' ').pop()), 0);
}

/** The attack's body: 200,000 tiny fields, then one file part of `fileBytes` zeros; a one-letter boundary keeps each field at 52 bytes. */
function attackForm(fields: number, fileBytes: number): Buffer {
  const field = Buffer.from('--x\r\ncontent-disposition: form-data; name="f"\r\n\r\n1\r\n');
  const head = Buffer.from('--x\r\ncontent-disposition: form-data; name="model"\r\n\r\nwhisper\r\n');
  const fileHead = Buffer.from(
    '--x\r\ncontent-disposition: form-data; name="file"; filename="a.wav"\r\ncontent-type: audio/wav\r\n\r\n',
  );
  return Buffer.concat([
    head,
    Buffer.alloc(field.length * fields).fill(field),
    fileHead,
    Buffer.alloc(fileBytes),
    Buffer.from('\r\n--x--\r\n'),
  ]);
}

interface RawAnswer {
  status: number;
  body: string;
}

/**
 * Writes one request by hand, its body in pieces, so the test sees where in
 * the body the answer came: `midBody` runs once, between two pieces, as soon
 * as the answer has arrived while the body is still being sent.
 */
async function sendInPieces(
  url: string,
  head: string,
  body: Buffer,
  midBody: () => Promise<void>,
): Promise<{ answer: RawAnswer; answeredBeforeLastByte: boolean }> {
  const { hostname, port } = new URL(url);
  const socket: Socket = connect(Number(port), hostname);
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  let received = Buffer.alloc(0);
  let answer: RawAnswer | null = null;
  let wake: (() => void) | null = null;
  socket.on('data', (chunk: Buffer) => {
    received = Buffer.concat([received, chunk]);
    const end = received.indexOf('\r\n\r\n');
    if (end === -1 || answer) return;
    const headers = received.toString('latin1', 0, end);
    const length = Number(/^content-length:\s*(\d+)/im.exec(headers)?.[1] ?? NaN);
    if (received.length < end + 4 + length) return;
    answer = { status: Number(headers.split(' ')[1]), body: received.toString('utf8', end + 4, end + 4 + length) };
    wake?.();
  });
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.on('error', () => undefined);
  const write = (bytes: Buffer | string) =>
    new Promise<void>((resolve, reject) => socket.write(bytes, (err) => (err ? reject(err) : resolve())));
  await write(`${head}Content-Length: ${body.length}\r\n\r\n`);
  const PIECE = 256 * 1024;
  let answeredBeforeLastByte = false;
  for (let at = 0; at < body.length && !socket.destroyed; at += PIECE) {
    await write(body.subarray(at, at + PIECE));
    if (answer && !answeredBeforeLastByte && at + PIECE < body.length) {
      answeredBeforeLastByte = true;
      await midBody();
    }
  }
  if (!answer) await Promise.race([new Promise<void>((resolve) => (wake = resolve)), closed]);
  socket.destroy();
  if (!answer)
    throw new Error(`the connection closed with no answer; received: ${received.toString('latin1').slice(0, 300)}`);
  return { answer, answeredBeforeLastByte };
}

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-sec-uploads-'));
  const control = await startControl([
    '--store',
    `sqlite:${join(dir, 'db')}`,
    '--join-token',
    JOIN,
    '--admin-token',
    ADMIN,
    '--reconcile-interval',
    '300ms',
    '--log-level',
    'warn',
  ]);
  ({ admin: adminUrl, client: clientUrl } = control.urls);
  const stateDir = join(dir, 'n1');
  stateDirs.push(stateDir);
  startLlmgw(
    [
      'agent',
      '--control',
      control.urls.agent,
      '--node-id',
      'uploads-n1',
      '--state-dir',
      stateDir,
      '--simulate',
      'gpus=0,ram=16g',
      '--heartbeat-interval',
      '300ms',
      '--port-range',
      '33100-33149',
      '--log-level',
      'warn',
    ],
    { env: { LLMGW_JOIN_TOKEN: JOIN } },
  );
  await waitFor(
    'the node up',
    async () =>
      (await api<{ liveness: string }[]>('GET', '/api/v1/nodes')).body.some((n) => n.liveness === 'up') || undefined,
  );
  const weights = join(dir, 'weights');
  mkdirSync(weights);
  const added = await api('POST', '/api/v1/models', {
    name: 'whisper',
    source: `file://${weights}`,
    scaling: { min: 1 },
    profiles: [{ engine: 'sim' }],
  });
  expect(added.status, JSON.stringify(added.body)).toBe(200);
  const created = await api<{ secret: string }>('POST', '/api/v1/keys', { name: 'uploads' });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  key = created.body.secret;
  await waitFor(
    'a ready replica of whisper',
    async () =>
      (await api<ReplicaView[]>('GET', '/api/v1/replicas?model=whisper')).body.some((r) => r.state === 'ready') ||
      undefined,
    60_000,
  );
}, 120_000);

afterAll(async () => {
  await stopAll();
  killEnginesOf(stateDirs);
});

describe('a multipart upload cannot stall the control plane', () => {
  it('refuses 200,000 fields and a 12 MB file as they arrive, with a 413 naming the limit, and answers probes and heartbeats meanwhile', async () => {
    const body = attackForm(200_000, 12 * 2 ** 20);
    expect(body.length, 'the attack fits the 25 MiB upload limit, so only the form limits stop it').toBeLessThan(
      25 * 2 ** 20,
    );
    const { host } = new URL(clientUrl);
    const head = `POST /v1/audio/transcriptions HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${key}\r\nContent-Type: multipart/form-data; boundary=x\r\n`;
    const probes: { healthz: number; heartbeats: boolean } = { healthz: 0, heartbeats: false };
    const { answer, answeredBeforeLastByte } = await sendInPieces(clientUrl, head, body, async () => {
      // The refusal is in, the rest of the 22 MB is still to come: every listener must be serving meanwhile.
      const health = await fetch(`${clientUrl}/healthz`);
      probes.healthz = health.status;
      const before = await heartbeatsTaken();
      probes.heartbeats = await waitFor(
        'a heartbeat taken while the refused upload is still arriving',
        async () => (await heartbeatsTaken()) > before || undefined,
      );
    });
    const error = (JSON.parse(answer.body) as { error?: { message?: string; type?: string; llmgw_code?: string } })
      .error;
    expect(answer.status, `answered ${answer.status} ${answer.body.slice(0, 300)}`).toBe(413);
    expect(error?.llmgw_code, "OpenAI's error shape, with llmgw's code").toBe('LLMGW_BODY_TOO_LARGE');
    expect(error?.type).toBe('invalid_request_error');
    expect(error?.message, 'names the limit and what to send instead').toMatch(/more than 64 fields.*send/);
    expect(answeredBeforeLastByte, 'refused as the form arrived, not after buffering it whole').toBe(true);
    expect(probes, 'the client listener and the agent listener answered while the upload was still arriving').toEqual({
      healthz: 200,
      heartbeats: true,
    });
  }, 120_000);

  it('still transcribes an honest upload with every field OpenAI and vLLM take, at the limit of 64', async () => {
    const form = new FormData();
    form.append('model', 'whisper');
    form.append('file', new Blob([new Uint8Array(3000).fill(7)], { type: 'audio/wav' }), 'talk.wav');
    form.append('response_format', 'json');
    // 64 text fields in all: the two above and 62 more (vLLM's sampling fields and the like).
    for (let i = 0; i < 62; i++) form.append(`extra_${i}`, String(i));
    const res = await fetch(`${clientUrl}/v1/audio/transcriptions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}` },
      body: form,
    });
    const text = await res.text();
    expect(res.status, text).toBe(200);
    expect((JSON.parse(text) as { text: string }).text).toMatch(/^heard 3000 bytes of talk\.wav/);
  }, 60_000);
});
