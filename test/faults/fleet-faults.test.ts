// Faults at the scale of the fleet: a node drained while clients stream from
// it, and half the fleet vanishing at once. A drain is routine maintenance,
// so a single failed request during one is a bug an operator pays for every
// week; and a rack going dark must not turn into a stampede of replacements
// (every fetch and engine start at once onto the nodes that remain), which
// the reconciler's per-pass creation cap (max_creates_per_pass) prevents.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, describe, expect, it } from 'vitest';
import { killEnginesOf, stopAll } from '../support/processes.js';
import { waitFor } from '../support/wait.js';
import { Fleet } from './fleet-support.js';

const fleets: Fleet[] = [];

afterAll(async () => {
  await stopAll();
  for (const f of fleets) killEnginesOf(f.stateDirs);
});

describe('fleet faults', () => {
  it('drains a node under steady streaming load with zero failed requests while the replica moves', async () => {
    const fleet = new Fleet(mkdtempSync(join(tmpdir(), 'llmgw-faults-drain-')), 31000);
    fleets.push(fleet);
    const control = await fleet.startControl(['--reconcile-interval', '300ms']);
    fleet.startAgent('d1');
    fleet.startAgent('d2');
    await fleet.nodesUp(2);
    // Twenty tokens a second, ten per answer: each stream is open for about half a second.
    await fleet.addModel({
      name: 'stream',
      scaling: { min: 1 },
      profiles: [{ engine: 'sim', args: ['--tokens-per-second', '20'] }],
    });
    const [first] = await fleet.ready('stream', 1);
    const drained = first!.shards[0]!.node;
    const key = (await fleet.api<{ secret: string }>('POST', '/api/v1/keys', { name: 'drain' })).body.secret;
    const ai = new OpenAI({ baseURL: `${control.urls.client}/v1`, apiKey: key, maxRetries: 0, timeout: 60_000 });

    let ok = 0;
    const failures: string[] = [];
    let stop = false;
    const streamer = async () => {
      while (!stop) {
        try {
          const stream = await ai.chat.completions.create({
            model: 'stream',
            messages: [{ role: 'user', content: 'x' }],
            max_tokens: 10,
            stream: true,
            stream_options: { include_usage: true },
          });
          let tokens = 0;
          for await (const chunk of stream) if (chunk.usage) tokens = chunk.usage.completion_tokens;
          if (tokens === 10) ok++;
          else failures.push(`a stream ended after ${tokens} of 10 tokens`);
        } catch (err) {
          failures.push(String(err));
        }
      }
    };
    const load = [streamer(), streamer(), streamer()];
    await waitFor('streams served before the drain', async () => (ok >= 6 ? true : undefined));

    const res = await fleet.api('POST', `/api/v1/nodes/${drained}/state`, { state: 'drain' });
    expect(res.body).toEqual({ id: drained, state: 'draining' });
    await waitFor(
      'the replica moved off the drained node',
      async () => {
        const list = await fleet.replicas('stream');
        const live = list.filter((r) => r.state !== 'stopping' && r.state !== 'failed');
        return live.length === 1 &&
          live[0]!.state === 'ready' &&
          live[0]!.shards[0]!.node !== drained &&
          !list.some((r) => r.id === first!.id)
          ? true
          : undefined;
      },
      90_000,
    );
    const afterMove = ok;
    await waitFor('streams served after the move', async () => (ok >= afterMove + 6 ? true : undefined), 60_000);
    stop = true;
    await Promise.all(load);
    expect(failures, `no request fails during the drain (${ok} served)`).toEqual([]);
    expect(fleet.engines(drained), 'the drained node runs nothing').toEqual([]);
  }, 240_000);

  it('half of eight nodes vanishing at once: replacements are created at most max_creates_per_pass per pass, and all are replaced', async () => {
    const fleet = new Fleet(mkdtempSync(join(tmpdir(), 'llmgw-faults-vanish-')), 30800);
    fleets.push(fleet);
    const cap = 2;
    // Info level: each pass's actions are logged with the pass number, which is what is counted.
    const control = await fleet.startControl([
      '--reconcile-interval',
      '300ms',
      '--node-stale-after',
      '3s',
      '--node-lost-after',
      '8s',
      '--max-creates-per-pass',
      String(cap),
      '--log-level',
      'info',
    ]);
    const ids = ['v1', 'v2', 'v3', 'v4', 'v5', 'v6', 'v7', 'v8'];
    for (const id of ids) fleet.startAgent(id);
    await fleet.nodesUp(8, 90_000);
    await fleet.addModel({ name: 'many', scaling: { min: 8 }, profiles: [{ engine: 'sim' }] });
    const before = await fleet.ready('many', 8, 120_000);
    // Half the nodes, those running the most replicas (placement spreads, but a node slow to report under load may get none).
    const load = new Map(ids.map((id) => [id, before.filter((r) => r.shards[0]!.node === id).length]));
    const gone = [...ids].sort((a, b) => load.get(b)! - load.get(a)!).slice(0, 4);
    const lost = before.filter((r) => gone.includes(r.shards[0]!.node));
    expect(lost.length, 'more replicas lost than one pass may create').toBeGreaterThan(cap);

    const mark = control.lines.length;
    await Promise.all(gone.map((id) => fleet.agents.get(id)!.stop('SIGKILL')));
    killEnginesOf(gone.map((id) => fleet.stateDir(id)));

    const after = await waitFor(
      'eight ready replicas again, on the nodes left',
      async () => {
        const ready = (await fleet.replicas('many')).filter((r) => r.state === 'ready');
        return ready.length === 8 && ready.every((r) => !gone.includes(r.shards[0]!.node)) ? ready : undefined;
      },
      120_000,
    );
    expect(after.filter((r) => before.some((b) => b.id === r.id)).length, 'the replicas on live nodes were kept').toBe(
      8 - lost.length,
    );

    // Creations per pass, from the control plane's own log of each pass's actions.
    const perPass = new Map<number, number>();
    for (const line of control.lines.slice(mark)) {
      let entry: { pass?: number; action?: string };
      try {
        entry = JSON.parse(line) as typeof entry;
      } catch {
        continue;
      }
      if (entry.pass !== undefined && (entry.action === 'create' || entry.action === 'retry'))
        perPass.set(entry.pass, (perPass.get(entry.pass) ?? 0) + 1);
    }
    const counts = [...perPass.values()];
    expect(
      counts.reduce((a, b) => a + b, 0),
      `replacements created (per pass: ${JSON.stringify([...perPass])})`,
    ).toBeGreaterThanOrEqual(lost.length);
    expect(
      Math.max(...counts),
      `no pass creates more than the cap (per pass: ${JSON.stringify([...perPass])})`,
    ).toBeLessThanOrEqual(cap);
    expect(counts.length, 'the replacements were spread over passes, not one stampede').toBeGreaterThanOrEqual(2);
  }, 300_000);
});
