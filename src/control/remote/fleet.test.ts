// What the control plane believes of a peer fleet, as the model views show
// it. Guards against a peer's capacity and load being read by the probe but
// shown nowhere (an operator could not tell why requests stayed local), and
// against the view leaking the probe's internals.
import pino from 'pino';
import { describe, expect, it } from 'vitest';
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
