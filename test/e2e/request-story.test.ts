// A request's whole story, told by `llmgw ctl request ID` (issue #39): one
// request is held cold (its model runs at min 0, so the request starts the
// first replica and waits for it), retried (that replica's sim engine takes
// longer than the router's upstream headers timeout to answer, so the
// attempt fails before any byte), and falls back to a second model, which
// answers. Real processes: a control plane (SQLite), one simulated agent
// running sim engines, a test OTLP receiver so the request has a trace id;
// ctl and the admin API on loopback. The lines ctl prints must tell those
// steps in the order they happened, with the trace id the spans carry.
// Engine ports 33400-33449.
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient, type RequestDetailView } from '../../src/api/index.js';
import { startOtlpReceiver, type OtlpReceiver } from '../support/otlp-receiver.js';
import { killEnginesOf, startControl, startLlmgw, stopAll } from '../support/processes.js';
import { waitFor } from '../support/wait.js';
import { runCtlCli } from './ctl-support.js';

const JOIN = 'e2e-story-join-token-0123456789abcdef';
const ADMIN = 'e2e-story-admin-token-0123456789abcdef';

let dir = '';
let clientUrl = '';
let api: AdminClient;
let receiver: OtlpReceiver;
let ctlEnv: Record<string, string>;
const stateDir = () => join(dir, 'node');

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  dir = mkdtempSync(join(tmpdir(), 'llmgw-e2e-story-'));
  const control = await startControl(
    [
      '--store',
      `sqlite:${join(dir, 'db')}`,
      '--join-token',
      JOIN,
      '--admin-token',
      ADMIN,
      '--api-keys',
      'off',
      '--reconcile-interval',
      '300ms',
      '--otlp-endpoint',
      receiver.url,
      // The slow engine below answers a whole (non-streamed) request after 8 s: past this, before any byte.
      '--upstream-headers-timeout',
      '2s',
      '--log-level',
      'warn',
    ],
    { env: { OTEL_BSP_SCHEDULE_DELAY: '200' } },
  );
  clientUrl = control.urls.client;
  api = new AdminClient({ baseUrl: control.urls.admin, token: ADMIN });
  ctlEnv = { LLMGW_ADMIN_URL: control.urls.admin, LLMGW_ADMIN_TOKEN: ADMIN };
  startLlmgw([
    'agent',
    '--control',
    control.urls.agent,
    '--join-token',
    JOIN,
    '--node-id',
    'n1',
    '--state-dir',
    stateDir(),
    '--simulate',
    'gpus=0,ram=16g',
    '--heartbeat-interval',
    '300ms',
    '--port-range',
    '33400-33449',
    '--log-level',
    'warn',
  ]);
  await waitFor('the node up', async () => {
    const nodes = await api.nodes();
    return nodes.length === 1 && nodes[0]!.liveness === 'up' ? true : undefined;
  });
  const weights = join(dir, 'weights');
  mkdirSync(weights);
  // The fallback first: a model may name only fallbacks the catalog has.
  await api.addModel({
    name: 'backup',
    source: `file://${weights}`,
    scaling: { min: 1 },
    profiles: [{ engine: 'sim' }],
  });
  await api.addModel({
    name: 'primary',
    source: `file://${weights}`,
    fallbacks: ['backup'],
    // Min 0, max 1: a request for it starts one replica and is held until it is ready.
    scaling: { min: 0, max: 1 },
    profiles: [{ engine: 'sim', args: ['--ttft-ms', '8000', '--startup-delay-ms', '500'] }],
  });
  await waitFor(
    'backup ready',
    async () => ((await api.replicas({ model: 'backup' })).some((r) => r.state === 'ready') ? true : undefined),
    60_000,
  );
}, 120_000);

afterAll(async () => {
  await stopAll();
  killEnginesOf([stateDir()]);
  await receiver?.close();
});

describe('ctl request tells a held, retried, fallen-back request in order', () => {
  it('prints the hold, the failed attempt, the backoff, the fallback and the answer, one line each, with the trace id', async () => {
    expect(await api.replicas({ model: 'primary' }), 'min 0: nothing of primary runs yet').toEqual([]);
    const res = await fetch(`${clientUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'primary', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 }),
    });
    const id = res.headers.get('x-request-id') ?? '';
    expect(res.status, await res.text()).toBe(200);

    const detail: RequestDetailView = await api.request(id);
    expect(detail, 'the record behind the lines').toMatchObject({
      status: 200,
      outcome: 'ok',
      fallback: 'backup',
      cold: { model: 'primary', end: 'ready' },
      attempts: [
        { model: 'primary', outcome: 'failed', choice: { by: 'only-candidate' } },
        { model: 'backup', outcome: 'answered', choice: { by: 'only-candidate' } },
      ],
    });
    expect(detail.cold!.held_ms, 'it waited for the replica to start').toBeGreaterThan(0);
    expect(detail.cold!.replica).toBe(detail.attempts[0]!.replica);
    expect(detail.attempts[1]!.backoff_ms, 'the retry waited its backoff').toBeGreaterThan(0);
    expect(detail.trace_id).toMatch(/^[0-9a-f]{32}$/);

    const r = await runCtlCli(['request', id], { env: ctlEnv });
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.split('\n');
    const line = (re: RegExp) => {
      const i = lines.findIndex((l) => re.test(l));
      expect(i, `a line matching ${re} in:\n${r.stdout}`).toBeGreaterThanOrEqual(0);
      return i;
    };
    const primaryReplica = detail.attempts[0]!.replica;
    const backupReplica = detail.attempts[1]!.replica;
    const order = [
      line(/^trace\s+[0-9a-f]{32}$/),
      line(/\+\s*0 ms {2}arrived: chat for model primary/),
      line(/admitted after \d+ ms/),
      line(/held: model primary has no ready replica; waiting for one to start/),
      line(new RegExp(`replica ${primaryReplica} of primary ready after \\d+ ms held`)),
      line(new RegExp(`attempt 1: replica ${primaryReplica} of primary on n1; won as the only candidate`)),
      line(/attempt 1 failed after \d+ ms: .*(timeout|headers)/i),
      line(/waited \d+ ms before retrying/),
      line(/falls back to model backup: no replica of primary was left to try/),
      line(new RegExp(`attempt 2: replica ${backupReplica} of backup on n1; won as the only candidate`)),
      line(/first byte of the answer at \d+ ms/),
      line(new RegExp(`attempt 2: replica ${backupReplica} answered 200`)),
      line(/\d+ prompt tokens, \d+ completion tokens/),
      line(
        new RegExp(
          `done: 200 from replica ${backupReplica} \\(fallback backup\\) after \\d+ ms; trace ${detail.trace_id}`,
        ),
      ),
    ];
    expect(order, `the steps in the order they happened:\n${r.stdout}`).toEqual([...order].sort((a, b) => a - b));
    expect(lines[order[0]!]).toContain(detail.trace_id!);

    const json = await runCtlCli(['-o', 'json', 'request', id], { env: ctlEnv });
    expect(json.code, json.stderr).toBe(0);
    expect((JSON.parse(json.stdout) as RequestDetailView).timeline.map((e) => e.kind)).toEqual(
      detail.timeline.map((e) => e.kind),
    );

    // The id ctl prints is the one the spans carry: an operator can take it to the tracing backend.
    await waitFor('the request span at the receiver', async () =>
      receiver.spans.some((s) => s.traceId === detail.trace_id) ? true : undefined,
    );
  }, 120_000);

  it('says where to look for an id this control plane does not hold', async () => {
    const r = await runCtlCli(['request', 'no-such-request'], { env: ctlEnv });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('has no request "no-such-request" in its log of the last');
    expect(r.stderr).toContain('`llmgw ctl requests` lists the ones it holds');
  });
});
