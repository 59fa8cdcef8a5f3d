// Regression tests for a control plane alone on SQLite scaling blind to its
// gateway processes: requests routed through `llmgw gateway` never reached
// its scaler, so a replica busy only through gateways looked idle and a model
// at zero wanted only there was never started. The gateways write their use
// and held requests to the store; GatewayDemand reads them and adds them to
// the control plane's own.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { Store } from '../store/index.js';
import { GatewayDemand } from './gateway-demand.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const clock = 10_000_000;
const now = () => clock;

async function setUp() {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-gateway-demand-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const store = await Store.open({ location: { kind: 'sqlite', path: join(dir, 'db') }, now });
  cleanups.push(() => store.close());
  const woken: number[] = [];
  const demand = new GatewayDemand({
    store,
    now,
    logger: pino({ level: 'silent' }),
    onMoreQueued: () => woken.push(clock),
  });
  cleanups.push(() => demand.close());
  return { store, demand, woken };
}

describe('GatewayDemand', () => {
  it("adds every fresh gateway's use to this control plane's own, and only fresh ones", async () => {
    const { store, demand } = await setUp();
    await store.replicaUse.save('gw-a', [{ replicaId: 'r1', inFlight: 2, lastUsedAtMs: clock - 50 }], clock);
    await store.replicaUse.save('gw-b', [{ replicaId: 'r1', inFlight: 1, lastUsedAtMs: clock - 10 }], clock);
    await store.replicaUse.save('gw-dead', [{ replicaId: 'r2', inFlight: 9, lastUsedAtMs: clock }], clock - 10_000);
    await demand.refresh();

    const local = new Map([
      ['r1', { inFlight: 1, lastUsedAtMs: clock - 500 }],
      ['r3', { inFlight: 4, lastUsedAtMs: null }],
    ]);
    const summed = demand.withUse(local);
    expect(summed.get('r1'), 'in flight summed, the newest use kept').toEqual({
      inFlight: 4,
      lastUsedAtMs: clock - 10,
    });
    expect(summed.get('r3'), 'one only this process uses is as it was').toEqual({ inFlight: 4, lastUsedAtMs: null });
    expect(summed.has('r2'), 'a gateway silent for 10 s is gone: its requests died with it').toBe(false);
  });

  it('adds held requests per model, and asks for a pass when the gateways hold more', async () => {
    const { store, demand, woken } = await setUp();
    await demand.refresh();
    expect(woken).toEqual([]);
    await store.modelDemand.save('gw-a', new Map([['cold', 2]]), clock);
    await demand.refresh();
    expect(
      demand.withQueued(
        new Map([
          ['cold', 1],
          ['warm', 3],
        ]),
      ),
    ).toEqual(
      new Map([
        ['cold', 3],
        ['warm', 3],
      ]),
    );
    expect(woken, 'a request held on a gateway for a model at zero: a pass now, not at the next tick').toHaveLength(1);
    await demand.refresh();
    expect(woken, 'no more held than before: no extra pass').toHaveLength(1);
  });

  it("counts only this process's own once the store cannot be read", async () => {
    const { store, demand } = await setUp();
    await store.replicaUse.save('gw-a', [{ replicaId: 'r1', inFlight: 3, lastUsedAtMs: clock }], clock);
    await demand.refresh();
    expect(demand.withUse(new Map()).get('r1')?.inFlight).toBe(3);
    await store.close();
    await demand.refresh();
    expect(demand.withUse(new Map()).size, 'figures that can no longer age out are dropped').toBe(0);
  });
});
