// Engines that fail while serving, end to end: one killed in the middle of a
// stream, and one that hangs with its process alive. The cost of getting
// these wrong is a replica that looks ready and eats requests: the crash must
// cost exactly the request it was serving, and a hang must be found by the
// agent's own health check (a hung process sends no exit event), not left to
// time out every client that lands on it. Both are restarted in place by the
// agent (warm node, weights on disk); the control plane keeps the replica.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killEnginesOf, stopAll } from '../support/processes.js';
import { waitFor } from '../support/wait.js';
import { alive, Fleet } from './fleet-support.js';

let fleet: Fleet;
let clientUrl = '';
let key = '';

function client(): OpenAI {
  // No retries in the client: each failure the router sends must reach the test as sent.
  return new OpenAI({ baseURL: `${clientUrl}/v1`, apiKey: key, maxRetries: 0, timeout: 60_000 });
}

/** The sim's own gauge of requests it is generating, from its /metrics. */
async function generating(endpoint: string): Promise<number> {
  const text = await (await fetch(`${endpoint}/metrics`)).text();
  return Number(
    text
      .split('\n')
      .find((l) => l.startsWith('vllm:num_requests_running'))
      ?.split(' ')
      .pop(),
  );
}

beforeAll(async () => {
  fleet = new Fleet(mkdtempSync(join(tmpdir(), 'llmgw-faults-engine-')), 30000);
  // A short upstream headers timeout: a hung engine's request ends in seconds, with a clear error.
  const control = await fleet.startControl([
    '--reconcile-interval',
    '300ms',
    '--upstream-headers-timeout',
    '2s',
    '--cold-start-timeout',
    '5s',
  ]);
  clientUrl = control.urls.client;
  // A liveness probe every 500 ms, two failures in a row: a hang is found within seconds.
  for (const id of ['e1', 'e2']) fleet.startAgent(id, ['--liveness-interval', '500ms', '--liveness-failures', '2']);
  await fleet.nodesUp(2);
  const created = await fleet.api<{ secret: string }>('POST', '/api/v1/keys', { name: 'faults' });
  expect(created.status).toBe(201);
  key = created.body.secret;
}, 120_000);

afterAll(async () => {
  await stopAll();
  killEnginesOf(fleet.stateDirs);
});

describe('engine faults', () => {
  it('an engine killed mid-stream costs that request one error; later requests are served by the other replica, and the agent restarts the engine in place', async () => {
    // Ten tokens a second: a 500-token stream stays open long enough to be cut.
    await fleet.addModel({
      name: 'crashy',
      scaling: { min: 2 },
      profiles: [{ engine: 'sim', args: ['--tokens-per-second', '10'] }],
    });
    const replicas = await fleet.ready('crashy', 2);

    const stream = await client().chat.completions.create({
      model: 'crashy',
      messages: [{ role: 'user', content: 'x' }],
      max_tokens: 500,
      stream: true,
    });
    let pieces = 0;
    let victim: string | undefined;
    let victimPid = 0;
    const err = await (async () => {
      for await (const chunk of stream) {
        if (chunk.choices[0]?.delta.content) pieces++;
        if (pieces === 2 && !victim) {
          // The replica generating this stream is the one whose sim says so.
          for (const r of replicas) if ((await generating(r.endpoint!)) > 0) victim = r.id;
          const record = fleet.engineOf(victim!);
          victimPid = record!.pid;
          process.kill(victimPid, 'SIGKILL');
        }
      }
      return null;
    })().catch((e: unknown) => e);
    expect(victim, 'one replica was generating the stream').toBeDefined();
    expect(err, 'the stream cut by the crash ends in an error, not a clean finish').toBeInstanceOf(OpenAI.APIError);
    expect(pieces, 'the stream was not restarted elsewhere (no second run of tokens)').toBeLessThan(50);

    // Later requests: every one is answered, by the surviving replica (or a retry before the first byte).
    const replies = await Promise.all(
      Array.from({ length: 8 }, () =>
        client().chat.completions.create({
          model: 'crashy',
          messages: [{ role: 'user', content: 'x' }],
          max_tokens: 2,
        }),
      ),
    );
    expect(
      replies.every((r) => r.usage?.completion_tokens === 2),
      'no request after the crash fails',
    ).toBe(true);

    // The agent restarts the engine in place after its backoff: the same replica, a new pid, its restart
    // count up; the control plane keeps the replica where it is (never marked failed, never placed again).
    let sawFailed = false;
    const restarted = await waitFor(
      'the crashed engine restarted in place and ready',
      async () => {
        const list = await fleet.replicas('crashy');
        if (list.some((r) => r.id === victim && r.state === 'failed')) sawFailed = true;
        const ready = list.filter((r) => r.state === 'ready');
        const record = fleet.engineOf(victim!);
        return record &&
          record.pid !== victimPid &&
          record.restarts >= 1 &&
          ready.length === 2 &&
          ready.some((r) => r.id === victim)
          ? record
          : undefined;
      },
      90_000,
    );
    expect(restarted.restarts, 'one crash, one restart').toBe(1);
    expect(sawFailed, "a crash the agent restarts is not the replica's failure").toBe(false);
    expect((await fleet.replicas('crashy')).map((r) => r.id).sort(), 'the same two replicas').toEqual(
      replicas.map((r) => r.id).sort(),
    );
  }, 240_000);

  it('a hung engine times its requests out with a clear error, is found by the liveness probe, and is restarted in place', async () => {
    // Answers one request, then hangs: every later request and health check is held open, unanswered.
    await fleet.addModel({
      name: 'hangs',
      scaling: { min: 1 },
      profiles: [{ engine: 'sim', args: ['--hang-after', '1'] }],
    });
    const [replica] = await fleet.ready('hangs', 1);
    const before = fleet.engineOf(replica!.id)!;
    expect(before.restarts).toBe(0);

    const first = await client().chat.completions.create({
      model: 'hangs',
      messages: [{ role: 'user', content: 'x' }],
      max_tokens: 2,
    });
    expect(first.usage?.completion_tokens).toBe(2);

    const hung = await client()
      .chat.completions.create({ model: 'hangs', messages: [{ role: 'user', content: 'x' }], max_tokens: 2 })
      .catch((e: unknown) => e);
    expect(hung, 'the request to a hung engine fails rather than waiting forever').toBeInstanceOf(OpenAI.APIError);
    // Every attempt timed out before any byte, so the router answers 502 and says why.
    expect((hung as InstanceType<typeof OpenAI.APIError>).status, (hung as Error).message).toBe(502);
    expect((hung as Error).message, 'the error names the timeout').toContain('no response headers in time');

    // The health check finds the hang (no request needed): the agent stops the engine and starts it again
    // in place (restart count 1, a new pid), and the same replica serves.
    await waitFor('the hung engine gone', async () => (alive(before.pid) ? undefined : true), 60_000);
    const after = await waitFor(
      'the hung engine restarted in place and ready',
      async () => {
        const record = fleet.engineOf(replica!.id);
        const r = (await fleet.replicas('hangs')).find((x) => x.id === replica!.id);
        return record && record.pid !== before.pid && record.restarts >= 1 && r?.state === 'ready' ? record : undefined;
      },
      90_000,
    );
    expect(after.restarts, 'one hang, one restart').toBe(1);
    const log = await fleet.api<{ lines: string[] }>('GET', `/api/v1/replicas/${replica!.id}/log?lines=200`);
    expect(JSON.stringify(log.body), 'the engine log says why it was stopped').toMatch(
      /failed 2 times in a row while ready/,
    );
    const again = await client().chat.completions.create({
      model: 'hangs',
      messages: [{ role: 'user', content: 'x' }],
      max_tokens: 2,
    });
    expect(again.usage?.completion_tokens, 'the restarted engine serves').toBe(2);
  }, 240_000);
});
