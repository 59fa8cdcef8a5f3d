// What the control plane believes of a peer fleet, as the model views show
// it. Guards against a peer's capacity and load being read by the probe but
// shown nowhere (an operator could not tell why requests stayed local), and
// against the view leaking the probe's internals.
import pino from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { modelViews } from '../adminapi/views.js';
import { compileModel, ModelSchema, type Model } from '../catalog/index.js';
import { RemoteFleet } from './fleet.js';
import type { ProbeResult } from './probe.js';

function remoteModel(name: string, api: 'llmgw' | 'chat'): Model {
  return compileModel(
    ModelSchema.parse({
      name,
      profiles: [{ engine: 'remote', remote: { url: 'http://peer.test', model: 'big', api } }],
    }),
    'file',
  );
}

function fleetOf(models: Model[], answer: ProbeResult): RemoteFleet {
  const byName = new Map(models.map((m) => [m.name, m]));
  return new RemoteFleet({
    catalog: { models: () => models, get: (n) => byName.get(n) },
    storedKey: async () => undefined,
    intervalMs: 60_000,
    now: () => 1_000,
    logger: pino({ level: 'silent' }),
    probe: async () => answer,
  });
}

describe('RemoteFleet.health in the model views', () => {
  it("shows a peer's ready replicas and load as its capacity endpoint said them", async () => {
    const peer = remoteModel('peer-big', 'llmgw');
    const fleet = fleetOf([peer], {
      status: 200,
      body: { object: 'llmgw.capacity', models: [{ id: 'big', ready: 2, running: 7, waiting: 3 }] },
    });
    await fleet.probeAll();
    expect(fleet.health('peer-big')).toEqual({
      healthy: true,
      reason: '',
      probedAtMs: 1_000,
      ready: 2,
      running: 7,
      waiting: 3,
    });
    expect(fleet.health('not-remote'), 'a model that is not remote has none').toBeNull();

    const catalog = { models: () => [peer] } as unknown as Parameters<typeof modelViews>[0]['catalog'];
    const [view] = modelViews({ catalog, remoteHealth: (m) => fleet.health(m) });
    expect(view!.remote, 'the view carries what was read, not when').toEqual({
      healthy: true,
      reason: '',
      ready: 2,
      running: 7,
      waiting: 3,
    });
  });

  it('shows a peer with no ready replica as out of routing, and an endpoint without load figures', async () => {
    const peer = fleetOf([remoteModel('peer-big', 'llmgw')], {
      status: 200,
      body: { models: [{ id: 'big', ready: 0, running: 0, waiting: 0 }] },
    });
    await peer.probeAll();
    expect(peer.health('peer-big')).toMatchObject({ healthy: false, ready: 0 });
    expect(peer.health('peer-big')!.reason).toMatch(/no ready replica/);

    const endpoint = fleetOf([remoteModel('hosted', 'chat')], { status: 200, body: { data: [] } });
    await endpoint.probeAll();
    expect(endpoint.health('hosted')).toEqual({ healthy: true, reason: '', probedAtMs: 1_000 });
  });
});

/** A probe stand-in whose answers the test gives by hand: each call waits until `answer` is called. */
function handProbe() {
  const waiting: { key: string | undefined; resolve: (r: ProbeResult) => void }[] = [];
  return {
    waiting,
    probe: (_url: string, _api: unknown, key: string | undefined) =>
      new Promise<ProbeResult>((resolve) => waiting.push({ key, resolve })),
    answerAll(): void {
      for (const w of waiting.splice(0)) w.resolve({ status: 200, body: { data: [{ id: 'big' }] } });
    },
  };
}

function keyedModel(name: string, apiKey: string): Model {
  return compileModel(
    ModelSchema.parse({
      name,
      profiles: [
        { engine: 'remote', remote: { url: 'http://hosted.test', model: 'big', api: 'chat', api_key: apiKey } },
      ],
    }),
    'store',
  );
}

const EMPTY_DIRECTORY = { ready: () => [], describe: () => 'none', demand: () => false };

describe('RemoteFleet never hands out a remote without its key', () => {
  it('serves a just-added inline-key remote with its key while the first probe is still out', async () => {
    // Regression: the probe round created the remote's state with no key and set it only when its probe
    // answered; a request in between was handed a replica without engineSecret, sent upstream with no key,
    // and the remote answered 401 ("no API key") for as long as the probe took.
    let models = [keyedModel('hosted', 'sk-inline-1')];
    const hand = handProbe();
    const fleet = new RemoteFleet({
      catalog: { models: () => models, get: (n) => models.find((m) => m.name === n) },
      storedKey: async () => 'sk-inline-1',
      intervalMs: 60_000,
      now: () => 1_000,
      logger: pino({ level: 'silent' }),
      probe: hand.probe,
    });
    const dir = fleet.directory(EMPTY_DIRECTORY);
    const round = fleet.probeAll();
    expect(
      hand.waiting.map((w) => w.key),
      'the probe carries the key',
    ).toEqual(['sk-inline-1']);
    expect(
      dir.ready('hosted').map((r) => r.engineSecret),
      'mid-probe',
    ).toEqual(['sk-inline-1']);

    // The catalog reloads from the store: the same remote, its key now `set` (sealed), while the round still runs.
    models = [compileModel(ModelSchema.parse(models[0]!.definition), 'store')];
    expect(models[0]!.remote!.key.kind).toBe('stored');
    expect(dir.ready('hosted'), 'a stored key not read yet keeps the remote out of routing').toEqual([]);
    expect(dir.describe('hosted')).toMatch(/out of routing: its API key is being read/);

    hand.answerAll();
    await round;
    const next = fleet.probeAll();
    // The round reads the stored key before it probes: answered once its probe is out, however many turns that takes.
    await vi.waitFor(() => expect(hand.waiting.length).toBe(1));
    hand.answerAll();
    await next;
    expect(
      dir.ready('hosted').map((r) => r.engineSecret),
      'once the round read the stored key',
    ).toEqual(['sk-inline-1']);
  });

  it('serves a recompiled stored-key remote at once when its key is already open in memory', async () => {
    // Regression: every catalog reload recompiles the model, so the fleet starts a fresh state for it; that
    // state must carry the key the secrets store already opened, not go out without one.
    const inline = keyedModel('hosted', 'sk-sealed-2');
    let models = [inline];
    const hand = handProbe();
    const fleet = new RemoteFleet({
      catalog: { models: () => models, get: (n) => models.find((m) => m.name === n) },
      storedKey: async () => 'sk-sealed-2',
      openedKey: (n) => (n === 'hosted' ? 'sk-sealed-2' : undefined),
      intervalMs: 60_000,
      now: () => 1_000,
      logger: pino({ level: 'silent' }),
      probe: hand.probe,
    });
    const dir = fleet.directory(EMPTY_DIRECTORY);
    expect(dir.ready('hosted').map((r) => r.engineSecret)).toEqual(['sk-sealed-2']);
    models = [compileModel(ModelSchema.parse(inline.definition), 'store')];
    expect(
      dir.ready('hosted').map((r) => r.engineSecret),
      'after the reload, mid-round',
    ).toEqual(['sk-sealed-2']);
    hand.answerAll();
    await fleet.probeAll();
  });

  it('keeps a remote whose api_key_file cannot be read out of routing, never keyless', () => {
    // Guards the other credential kind: an unreadable key file must not be presented as a keyless replica.
    const m = compileModel(
      ModelSchema.parse({
        name: 'filed',
        profiles: [
          {
            engine: 'remote',
            remote: { url: 'http://hosted.test', model: 'big', api: 'chat', api_key_file: '/nonexistent/llmgw-key' },
          },
        ],
      }),
      'file',
    );
    const hand = handProbe();
    const fleet = new RemoteFleet({
      catalog: { models: () => [m], get: (n) => (n === 'filed' ? m : undefined) },
      storedKey: async () => undefined,
      intervalMs: 60_000,
      now: () => 1_000,
      logger: pino({ level: 'silent' }),
      probe: hand.probe,
    });
    const dir = fleet.directory(EMPTY_DIRECTORY);
    expect(dir.ready('filed')).toEqual([]);
    // Before its first probe the refusal names the file, not a key "being read" that never will be.
    expect(dir.describe('filed')).toMatch(/api_key_file \/nonexistent\/llmgw-key cannot be read/);
  });
});
