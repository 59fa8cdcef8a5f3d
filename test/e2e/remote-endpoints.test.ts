// Remote endpoints end to end: a real `llmgw control` with a SQLite store and
// a key file, and sim engines started on loopback as the remotes (an
// OpenAI-compatible API that asks for an API key, one that answers 429 past
// one request at a time, one that never answers). Guards against: a remote's
// API key reaching a log, an API answer or the store file in plain text
// (the canary); a remote's 429 relayed to the client instead of waited out;
// a hung remote holding a request for the whole request timeout.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient } from '../../src/api/index.js';
import { stopAll, type ControlUrls, type RunningProcess } from '../support/processes.js';
import { expectCanaryHidden, startControlForRemotes, startSimRemote as sim } from '../support/remotes.js';
import { waitFor } from '../support/wait.js';

const ADMIN = 'e2e-remote-admin-token-0123456789abcdef';
/** Set as a remote's API key: it must appear nowhere it could be read. */
const CANARY = 'sk-canary-remote-e2e-5b1d9f3a7c2e';

let dir: string;
let api: AdminClient;
let clientUrl: string;
let control: RunningProcess & { urls: ControlUrls };

function chat(model: string, content = 'hello'): Promise<Response> {
  return fetch(`${clientUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content }], max_tokens: 4 }),
  });
}

describe('remote endpoints', () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-e2e-remote-'));
    control = await startControlForRemotes({ dir, storePath: join(dir, 'db'), adminToken: ADMIN, keyByte: '3f' });
    api = new AdminClient({ baseUrl: control.urls.admin, token: ADMIN, actor: 'e2e' });
    clientUrl = control.urls.client;
  }, 120_000);

  afterAll(async () => {
    await control?.stop();
    await stopAll();
  });

  it('serves a model from a remote that asks for an API key, the key attached by the control plane', async () => {
    const url = await sim(['--api-key', CANARY, '--model', 'upstream-name']);
    await api.addModel({
      name: 'far',
      profiles: [{ engine: 'remote', remote: { url, model: 'upstream-name', api: 'chat', api_key: CANARY } }],
    });
    // Regression (issue #38): a request right after the add could go upstream without the key (a 401 from the
    // remote) while the first probe was out; waiting for a 200 hid it. The first request must be served.
    const res = await chat('far');
    expect(res.status, `the first request: ${await res.clone().text()}`).toBe(200);
    const body = (await res.json()) as { choices: unknown[] };
    expect(body.choices.length, 'an answer from the remote').toBe(1);
    const [record] = (await api.requests({ model: 'far', limit: 1 })).requests;
    expect(record?.attempts?.[0]?.replica, 'the request log names the remote replica').toBe('remote:far');
  });

  it('waits out a remote 429: the client gets 429 with Retry-After, and the remote serves again after it', async () => {
    const url = await sim(['--model', 'busy', '--max-concurrency', '1', '--overflow', 'reject', '--ttft-ms', '1500']);
    await api.addModel({ name: 'busy', profiles: [{ engine: 'remote', remote: { url } }] });
    await waitFor('the busy remote to answer', async () => ((await chat('busy')).status === 200 ? true : undefined));
    const [first, second] = await Promise.all([chat('busy'), chat('busy')]);
    const statuses = [first.status, second.status].sort();
    expect(statuses, 'one served, one refused while the remote was full').toEqual([200, 429]);
    const refused = first.status === 429 ? first : second;
    expect(Number(refused.headers.get('retry-after')), 'the wait is passed on').toBeGreaterThan(0);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('LLMGW_REMOTE_BUSY');
    await waitFor('the remote to be chosen again after its Retry-After', async () =>
      (await chat('busy')).status === 200 ? true : undefined,
    );
  });

  it('answers 504 for a remote that never answers, within its own timeout', async () => {
    const url = await sim(['--model', 'hung', '--hang']);
    // The probe of a hung remote fails too; the request races it, so either answer says the remote gave nothing.
    await api.addModel({ name: 'hung', profiles: [{ engine: 'remote', remote: { url, timeout: '1s' } }] });
    const res = await chat('hung');
    expect([503, 504], `status ${res.status}`).toContain(res.status);
    if (res.status === 504)
      expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/no answer in time/);
    await waitFor('the probe to take the hung remote out of routing', async () =>
      (await chat('hung')).status === 503 ? true : undefined,
    );
  });

  it('never shows the canary: not in an API answer, a log line or the store file', async () => {
    const answers = await expectCanaryHidden({ canary: CANARY, api, control, dir, storePrefix: 'db' });
    expect(answers, 'the catalog view says the key is set').toContain('"api_key":"set"');
    const page = await fetch(`${control.urls.admin}/v1/models`).then((r) => r.text());
    expect(page).not.toContain(CANARY);
  });
});
