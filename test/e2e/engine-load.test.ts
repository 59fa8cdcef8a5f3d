// An engine's own queue, end to end: a real `llmgw control` and agent, a sim
// engine slowed by its profile to one sequence at a time, and requests that
// pile up inside it. The agent reads the engine's /metrics, the heartbeat
// carries the sample, and the admin API's replica view (what ctl and the
// dashboard show, and what the router chooses by) reports the queue. Before
// engine load was scraped, nothing outside the engine knew it was queueing.
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient } from '../../src/api/index.js';
import { killEnginesOf, startControl, startLlmgw, stopAll } from '../support/processes.js';
import { waitFor } from '../support/wait.js';

const JOIN = 'e2e-engine-load-join-token-0123456789abcdef';
const ADMIN = 'e2e-engine-load-admin-token-0123456789abcdef';

let dir: string;
let api: AdminClient;
let clientUrl: string;
const stateDirs: string[] = [];
const aborts: AbortController[] = [];

describe('engine load reaches the replica view', () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-e2e-engine-load-'));
    const control = await startControl([
      '--store',
      `sqlite:${join(dir, 'db')}`,
      '--join-token',
      JOIN,
      '--admin-token',
      ADMIN,
      '--api-keys',
      'off',
      '--reconcile-interval',
      '500ms',
      '--log-level',
      'warn',
    ]);
    api = new AdminClient({ baseUrl: control.urls.admin, token: ADMIN, actor: 'e2e' });
    clientUrl = control.urls.client;
    const stateDir = join(dir, 'n1');
    stateDirs.push(stateDir);
    // Engine ports 27600-27649, apart from the other e2e files. The default heartbeat (5 s) is kept: load must arrive sooner, poked by the scraper.
    startLlmgw([
      'agent',
      '--control',
      control.urls.agent,
      '--join-token',
      JOIN,
      '--node-id',
      'n1',
      '--state-dir',
      stateDir,
      '--simulate',
      'gpus=1xh100-80gb,ram=64g,disk=/data:1t:local',
      '--port-range',
      '27600-27649',
      '--log-level',
      'warn',
    ]);
    await waitFor('the agent to join', async () =>
      (await api.nodes()).some((n) => n.liveness === 'up' && n.gpu_total === 1) ? true : undefined,
    );
    const weights = join(dir, 'weights');
    mkdirSync(weights, { recursive: true });
    // One sequence at a time, two tokens a second: the second and third requests wait inside the engine.
    await api.addModel({
      name: 'slow',
      source: `file://${weights}`,
      scaling: { min: 1 },
      profiles: [{ engine: 'sim', args: ['--max-concurrency', '1', '--tokens-per-second', '2'] }],
    });
    await waitFor(
      'the replica to be ready',
      async () => ((await api.replicas({ model: 'slow' })).some((r) => r.state === 'ready') ? true : undefined),
      60_000,
    );
  }, 120_000);

  afterAll(async () => {
    for (const a of aborts) a.abort();
    await stopAll();
    killEnginesOf(stateDirs);
  });

  it('shows an idle engine as an empty queue, then one running and two waiting', async () => {
    const idle = await waitFor('a first load sample', async () => (await api.replicas({ model: 'slow' }))[0]?.load);
    expect(idle, 'the sim reports vLLM names: running, waiting and KV use').toMatchObject({
      running: 0,
      waiting: 0,
      kv_usage: 0,
    });

    for (let i = 0; i < 3; i++) {
      const abort = new AbortController();
      aborts.push(abort);
      void fetch(`${clientUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'slow',
          messages: [{ role: 'user', content: `q${i}` }],
          max_tokens: 1000,
          stream: true,
        }),
        signal: abort.signal,
      })
        // Read to the end (the abort in afterAll): a cancelled body would end the request upstream too.
        .then(async (res) => {
          const reader = res.body?.getReader();
          while (reader && !(await reader.read()).done);
        })
        .catch(() => undefined);
    }
    const busy = await waitFor(
      'the queue to show',
      async () => {
        const load = (await api.replicas({ model: 'slow' }))[0]?.load;
        return load && load.waiting === 2 ? load : undefined;
      },
      20_000,
    );
    expect(busy, 'one sequence generating, two waiting for it, the cache (running / max sequences) full').toMatchObject(
      { running: 1, waiting: 2, kv_usage: 1 },
    );
    expect(busy.age_ms, 'dated, so a reader can tell how old it is').toBeGreaterThanOrEqual(0);
  });
});
