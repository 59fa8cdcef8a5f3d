import { describe, expect, it } from 'vitest';
import type { PlacementNode } from '../placement/index.js';
import { createPrng, pick, randomInt, syntheticNode, type Prng } from '../placement/synthetic.js';
import { applyPlan } from './apply.js';
import { planPass, type Plan, type PlanInput, type PlanModel, type PlanOptions, type PlanProfile } from './plan.js';
import { COUNTING_STATES, type ReplicaRecord } from './types.js';

function profile(over: Partial<PlanProfile> = {}): PlanProfile {
  return {
    name: 'vllm-1',
    engine: 'vllm',
    gpus: 1,
    shards: 1,
    gpuClasses: [],
    gpuMemoryGiB: null,
    memoryGiB: null,
    diskGiB: null,
    pool: null,
    ...over,
  };
}

function model(name: string, min: number, over: Partial<PlanProfile> = {}): PlanModel {
  return { name, source: `hf://org/${name}`, scaling: { min, max: min }, profiles: [profile(over)] };
}

/** A small world the tests step through: records, a clock and ids, with each pass's plan applied. */
class World {
  records: ReplicaRecord[] = [];
  now = 1_000_000;
  private readonly nextId = { replica: 0, shard: 0 };
  plans: Plan[] = [];
  inFlight = new Map<string, number>();
  /** The scaler's numbers; absent = scaling.min. */
  wanted: Map<string, number> | undefined;
  constructor(
    public nodes: PlacementNode[],
    public models: PlanModel[],
    readonly options: PlanOptions = {},
  ) {}

  input(): PlanInput {
    const previous = this.plans.at(-1);
    return {
      now: this.now,
      models: this.models,
      nodes: this.nodes,
      replicas: this.records,
      inFlight: this.inFlight,
      ...(previous ? { previous } : {}),
      ...(this.wanted ? { wanted: this.wanted } : {}),
    };
  }

  pass(): Plan {
    const plan = planPass(this.input(), this.options);
    this.plans.push(plan);
    const newId = (kind: 'replica' | 'shard') =>
      `${kind === 'replica' ? 'r' : 's'}${String(this.nextId[kind]++).padStart(4, '0')}`;
    this.records = applyPlan(this.records, plan, { now: this.now, newId }).records;
    return plan;
  }

  /** Every shard of every counting replica reports `state` (what agents would do). */
  report(state: 'ready' | 'starting', only?: (r: ReplicaRecord) => boolean): void {
    this.records = this.records.map((r) =>
      COUNTING_STATES.has(r.state) && (!only || only(r))
        ? { ...r, state: state === 'ready' ? 'ready' : 'starting', shards: r.shards.map((s) => ({ ...s, state })) }
        : r,
    );
  }

  setNode(id: string, over: Partial<PlacementNode>): void {
    this.nodes = this.nodes.map((n) => (n.id === id ? { ...n, ...over } : n));
  }

  counting(modelName?: string): ReplicaRecord[] {
    return this.records.filter((r) => COUNTING_STATES.has(r.state) && (!modelName || r.model === modelName));
  }

  nodesOf(r: ReplicaRecord): string[] {
    return r.shards.map((s) => s.nodeId);
  }
}

const kinds = (plan: Plan) => plan.actions.map((a) => a.kind);

describe('planPass: table cases', () => {
  it('places a model from empty up to scaling.min, on different GPUs', () => {
    const w = new World(
      [
        syntheticNode('n1', {
          gpus: [
            { index: 0, healthy: true },
            { index: 1, healthy: true },
          ],
        }),
      ],
      [model('m', 2)],
    );
    const plan = w.pass();
    expect(kinds(plan), 'two creations for min 2').toEqual(['create', 'create']);
    const gpus = w.records.flatMap((r) => r.shards.flatMap((s) => s.gpuIndices));
    expect(new Set(gpus).size, 'the two replicas do not share a GPU').toBe(2);
    expect(w.pass().actions, 'a second pass with nothing changed does nothing').toEqual([]);
  });

  it('stops extra replicas, newest first, never below wanted', () => {
    const w = new World([syntheticNode('n1')], [model('m', 3)]);
    w.pass();
    w.report('ready');
    w.now += 1000;
    w.models = [model('m', 1)];
    const plan = w.pass();
    const stops = plan.actions.filter((a) => a.kind === 'stop');
    expect(stops.map((s) => s.kind === 'stop' && s.replicaId)).toEqual(['r0002', 'r0001']);
    for (const s of stops) expect(s.reason, 'every stop says why').toMatch(/wants 1 replica\(s\) and has 3/);
    expect(w.counting('m').map((r) => r.id)).toEqual(['r0000']);
  });

  it("scales down by the scaler's number: drains the idlest replica (not the newest), and stops it once nothing is in flight", () => {
    const gpus = [0, 1, 2].map((index) => ({ index, healthy: true }));
    const w = new World([syntheticNode('n1', { gpus })], [{ ...model('m', 1), scaling: { min: 1, max: 3 } }]);
    w.wanted = new Map([['m', 3]]);
    expect(kinds(w.pass())).toEqual(['create', 'create', 'create']);
    w.report('ready');
    w.now += 60_000;
    // r0001 served last a minute ago; r0000 and r0002 just now, and r0002 still has a request in flight.
    w.records = w.records.map((r) => ({ ...r, lastUsedAtMs: r.id === 'r0001' ? w.now - 60_000 : w.now - 1000 }));
    w.inFlight = new Map([['r0002', 1]]);
    w.wanted.set('m', 2);
    const plan = w.pass();
    expect(plan.actions.map((a) => [a.kind, 'replicaId' in a ? a.replicaId : ''])).toEqual([['drain', 'r0001']]);
    expect(plan.actions[0]!.reason).toMatch(/wants 2 replica\(s\) and has 3.*idle 60s.*finishes what it serves/);

    // Still serving one request: it stays draining (the router sends it nothing new).
    w.inFlight = new Map([['r0001', 1]]);
    w.now += 1000;
    expect(w.pass().actions, 'a draining replica with a request in flight is not stopped').toEqual([]);
    w.inFlight = new Map();
    expect(w.pass().actions).toEqual([{ kind: 'stop', replicaId: 'r0001', reason: 'drained: no requests in flight' }]);
    expect(w.counting('m').map((r) => r.id)).toEqual(['r0000', 'r0002']);
  });

  it('replaces a replica on a lost node, and moves nothing for a stale one', () => {
    const w = new World([syntheticNode('a'), syntheticNode('b')], [model('m', 1)]);
    w.pass();
    w.report('ready');
    const [first] = w.counting('m');
    const home = w.nodesOf(first!)[0]!;
    const other = home === 'a' ? 'b' : 'a';

    w.setNode(home, { liveness: 'stale' });
    expect(w.pass().actions, 'a stale node is given until it is lost').toEqual([]);

    w.setNode(home, { liveness: 'lost' });
    const plan = w.pass();
    expect(kinds(plan)).toEqual(['markLost', 'create']);
    const lost = plan.actions[0]!;
    expect(lost.kind === 'markLost' && lost.error).toBe(`node ${home} lost`);
    const old = w.records.find((r) => r.id === first!.id)!;
    expect(old.state).toBe('stopping');
    expect(old.error).toBe(`node ${home} lost`);
    expect(w.nodesOf(w.counting('m')[0]!)).toEqual([other]);
    // The lost shard is gone with its node; the stopping replica is forgotten on the next pass.
    expect(kinds(w.pass())).toEqual(['forget']);
  });

  it('drains make-before-break: replacement first, old replica stopped only after the replacement is ready', () => {
    const w = new World([syntheticNode('a'), syntheticNode('b')], [model('m', 1)]);
    w.pass();
    w.report('ready');
    const old = w.counting('m')[0]!;
    const home = w.nodesOf(old)[0]!;
    w.setNode(home, { adminState: 'draining' });

    let plan = w.pass();
    expect(kinds(plan), 'first a replacement').toEqual(['create']);
    const created = plan.actions[0]!;
    expect(created.kind === 'create' && created.replaces).toBe(old.id);
    expect(w.records.find((r) => r.id === old.id)!.state, 'the old replica keeps serving').toBe('ready');
    const replacement = w.records.find((r) => r.replaces === old.id)!;
    expect(w.nodesOf(replacement)).not.toContain(home);

    w.now += 1000;
    expect(w.pass().actions, 'nothing more while the replacement starts').toEqual([]);

    w.report('ready', (r) => r.id === replacement.id);
    plan = w.pass();
    expect(plan.actions).toEqual([
      {
        kind: 'drain',
        replicaId: old.id,
        reason: `node ${home} is draining and replacement ${replacement.id} is ready`,
      },
    ]);

    w.inFlight.set(old.id, 2);
    w.now += 1000;
    expect(w.pass().actions, 'in-flight requests finish before the stop').toEqual([]);
    w.inFlight.set(old.id, 0);
    w.now += 1000;
    plan = w.pass();
    expect(plan.actions).toMatchObject([
      { kind: 'stop', replicaId: old.id, reason: expect.stringMatching(/^drained/) },
    ]);
  });

  it('stops a draining replica at the drain deadline even with requests in flight', () => {
    const w = new World([syntheticNode('a'), syntheticNode('b')], [model('m', 1)], { drainDeadlineMs: 60_000 });
    w.pass();
    w.report('ready');
    const old = w.counting('m')[0]!;
    w.setNode(w.nodesOf(old)[0]!, { adminState: 'draining' });
    w.pass();
    w.report('ready');
    w.pass();
    w.inFlight.set(old.id, 5);
    w.now += 59_000;
    expect(w.pass().actions).toEqual([]);
    w.now += 1_000;
    expect(w.pass().actions).toMatchObject([
      { kind: 'stop', replicaId: old.id, reason: 'drain deadline of 1m passed with 5 request(s) still in flight' },
    ]);
  });

  it('keeps the old replica when a drain finds no room, and says why', () => {
    const w = new World([syntheticNode('a'), syntheticNode('b', { adminState: 'cordoned' })], [model('m', 1)]);
    w.pass();
    w.report('ready');
    w.setNode('a', { adminState: 'draining' });
    const plan = w.pass();
    expect(plan.actions).toEqual([]);
    expect(plan.blockedDrains).toEqual([
      { replicaId: 'r0000', model: 'm', nodeIds: ['a'], reason: expect.stringContaining('stays on draining node a') },
    ]);
    const why = plan.rejections.get('m')!;
    expect(why.purpose).toBe('drain');
    expect(why.rejections.map((r) => `${r.node}:${r.code}`).sort()).toEqual(['a:draining', 'a:excluded', 'b:cordoned']);
    expect(w.counting('m')).toHaveLength(1);
  });

  it('moves at most maxParallel replicas of one model at a time', () => {
    const nodes = [
      syntheticNode('a', {
        gpus: [
          { index: 0, healthy: true },
          { index: 1, healthy: true },
          { index: 2, healthy: true },
        ],
      }),
      syntheticNode('b'),
      syntheticNode('c'),
    ];
    const w = new World([nodes[0]!], [model('m', 3)]);
    w.pass();
    w.report('ready');
    w.nodes = [{ ...nodes[0]!, adminState: 'draining' }, nodes[1]!, nodes[2]!];
    expect(kinds(w.pass()), 'one move at a time by default').toEqual(['create']);

    const w2 = new World([nodes[0]!], [model('m', 3)], { maxParallel: 2 });
    w2.pass();
    w2.report('ready');
    w2.nodes = [{ ...nodes[0]!, adminState: 'draining' }, nodes[1]!, nodes[2]!];
    expect(kinds(w2.pass())).toEqual(['create', 'create']);
  });

  it('cordon stops new placement only: the replica there stays, new ones go elsewhere', () => {
    const w = new World([syntheticNode('a'), syntheticNode('b')], [model('m', 1)]);
    w.pass();
    w.report('ready');
    const home = w.nodesOf(w.counting('m')[0]!)[0]!;
    w.setNode(home, { adminState: 'cordoned' });
    expect(w.pass().actions, 'nothing moves off a cordoned node').toEqual([]);
    w.models = [model('m', 2)];
    const plan = w.pass();
    expect(plan.actions).toHaveLength(1);
    const created = plan.actions[0]!;
    expect(created.kind === 'create' && created.placement.shards[0]!.nodeId).not.toBe(home);
  });

  it('retries a failed replica after an exponential backoff, keeping its last error', () => {
    const w = new World([syntheticNode('a')], [model('m', 1)], { retryBaseMs: 10_000 });
    w.pass();
    const id = w.records[0]!.id;
    const fail = () => {
      w.records = w.records.map((r) => ({
        ...r,
        state: 'starting',
        shards: r.shards.map((s) => ({ ...s, state: 'failed', error: 'engine exited with code 1' })),
      }));
    };
    fail();
    let plan = w.pass();
    expect(plan.actions).toEqual([
      expect.objectContaining({
        kind: 'markFailed',
        replicaId: id,
        failures: 1,
        nextRetryAtMs: w.now + 10_000,
        error: 'shard 0 on node a failed: engine exited with code 1',
      }),
    ]);
    w.now += 9_999;
    expect(w.pass().actions, 'no retry and no new replica during the backoff').toEqual([]);
    w.now += 1;
    plan = w.pass();
    expect(kinds(plan)).toEqual(['retry']);
    const retried = w.records.find((r) => r.id === id)!;
    expect(retried).toMatchObject({
      state: 'pending',
      failures: 1,
      error: 'shard 0 on node a failed: engine exited with code 1',
    });

    fail();
    plan = w.pass();
    expect(plan.actions[0]).toMatchObject({ kind: 'markFailed', failures: 2, nextRetryAtMs: w.now + 20_000 });
  });

  it('throttles creations when many nodes vanish at once', () => {
    const nodes = Array.from({ length: 6 }, (_, i) => syntheticNode(`n${i}`, { gpus: [{ index: 0, healthy: true }] }));
    const w = new World(nodes, [model('m', 3)], { maxCreatesPerPass: 2 });
    w.pass();
    w.pass();
    w.report('ready');
    expect(w.counting('m')).toHaveLength(3);
    for (const r of w.counting('m')) w.setNode(w.nodesOf(r)[0]!, { liveness: 'lost' });
    const plan = w.pass();
    expect(kinds(plan).filter((k) => k === 'markLost')).toHaveLength(3);
    expect(
      kinds(plan).filter((k) => k === 'create'),
      'two creations, the cap',
    ).toHaveLength(2);
    expect(plan.throttled).toBe(1);
  });

  it('stops the replicas of a model removed from the catalog', () => {
    const w = new World([syntheticNode('a')], [model('m', 1)]);
    w.pass();
    w.models = [];
    expect(w.pass().actions).toMatchObject([{ kind: 'stop', reason: 'model m is no longer in the catalog' }]);
  });

  it('does not place a blocked model again until the fleet changes (or blockedRetryMs passes)', () => {
    const w = new World([syntheticNode('a', { gpus: [{ index: 0, healthy: true }] })], [model('m', 1, { gpus: 2 })], {
      blockedRetryMs: 60_000,
    });
    const first = w.pass().rejections.get('m')!;
    expect(first.atMs).toBe(w.now);
    w.now += 30_000;
    expect(w.pass().rejections.get('m'), 'same fleet: the answer is kept, placement not asked again').toBe(first);
    w.now += 30_000;
    expect(w.pass().rejections.get('m')!.atMs, 'after blockedRetryMs it is asked again').toBe(w.now);
    w.nodes = [
      ...w.nodes,
      syntheticNode('b', {
        gpus: [
          { index: 0, healthy: true },
          { index: 1, healthy: true },
        ],
      }),
    ];
    w.now += 1_000;
    const plan = w.pass();
    expect(kinds(plan), 'a node with room arrives: placed at once').toEqual(['create']);
    expect(plan.rejections.has('m')).toBe(false);
  });

  it('replaces a replica whose profile the model no longer has', () => {
    const w = new World([syntheticNode('a')], [model('m', 1)]);
    w.pass();
    w.models = [model('m', 1, { name: 'renamed' })];
    const plan = w.pass();
    expect(plan.actions).toMatchObject([
      { kind: 'stop', replicaId: 'r0000', reason: 'model m no longer has profile vllm-1' },
      { kind: 'create', profile: 'renamed' },
    ]);
  });

  it('keeps the rejections of a model that fits nowhere', () => {
    const w = new World([syntheticNode('a', { engines: ['llamacpp'] })], [model('m', 1)]);
    const plan = w.pass();
    expect(plan.actions).toEqual([]);
    expect(plan.rejections.get('m')).toMatchObject({
      purpose: 'scale',
      nodeCount: 1,
      rejections: [{ node: 'a', code: 'engine_missing' }],
    });
  });
});

describe('planPass: properties over random fleets', () => {
  function randomWorld(prng: Prng): World {
    const nodes = Array.from({ length: randomInt(prng, 1, 8) }, (_, i) =>
      syntheticNode(`n${i}`, {
        gpus: Array.from({ length: randomInt(prng, 0, 4) }, (_, index) => ({ index, healthy: prng() > 0.1 })),
        adminState: pick(prng, ['ready', 'ready', 'ready', 'cordoned', 'draining'] as const),
      }),
    );
    const models = Array.from({ length: randomInt(prng, 1, 4) }, (_, i) =>
      model(`m${i}`, randomInt(prng, 0, 3), { gpus: randomInt(prng, 1, 2) }),
    );
    return new World(nodes, models, { maxCreatesPerPass: randomInt(prng, 1, 10) });
  }

  /** Random events between passes: agents report, nodes are lost or drained, shards fail, the clock moves. */
  function perturb(w: World, prng: Prng): void {
    w.now += randomInt(prng, 0, 120_000);
    const roll = prng();
    if (roll < 0.3) w.report('ready', () => prng() < 0.7);
    else if (roll < 0.4) w.setNode(pick(prng, w.nodes).id, { liveness: pick(prng, ['up', 'stale', 'lost'] as const) });
    else if (roll < 0.5)
      w.setNode(pick(prng, w.nodes).id, { adminState: pick(prng, ['ready', 'cordoned', 'draining'] as const) });
    else if (roll < 0.6 && w.records.length) {
      const victim = pick(prng, w.records).id;
      w.records = w.records.map((r) =>
        r.id === victim && COUNTING_STATES.has(r.state)
          ? { ...r, shards: r.shards.map((s) => ({ ...s, state: 'failed', error: 'boom' })) }
          : r,
      );
    } else if (roll < 0.7) {
      // Agents confirm stops.
      w.records = w.records.map((r) =>
        r.state === 'stopping' ? { ...r, shards: r.shards.map((s) => ({ ...s, state: 'stopped' })) } : r,
      );
    }
  }

  /** Counting replicas of a model, a replica and its counting replacement taken as one. */
  function slots(records: readonly ReplicaRecord[], modelName: string): number {
    const live = records.filter((r) => r.model === modelName && COUNTING_STATES.has(r.state));
    const replaced = new Set(live.map((r) => r.replaces));
    return live.filter((r) => !replaced.has(r.id)).length;
  }

  it('never gives a GPU to two shards, gives every stop a reason, and never creates past wanted', () => {
    for (let seed = 1; seed <= 120; seed++) {
      const prng = createPrng(seed);
      const w = randomWorld(prng);
      for (let step = 0; step < 20; step++) {
        const before = w.records;
        const { previous: _previous, ...fresh } = w.input();
        const unmemoised = planPass(fresh, w.options);
        const plan = w.pass();
        expect(
          plan.actions,
          `seed ${seed}, pass ${step}: holding blocked models never changes what a pass does`,
        ).toEqual(unmemoised.actions);
        const where = `seed ${seed}, pass ${step}`;

        for (const a of plan.actions) {
          if (
            a.kind === 'stop' ||
            a.kind === 'forget' ||
            a.kind === 'drain' ||
            a.kind === 'markLost' ||
            a.kind === 'markFailed'
          ) {
            expect(a.reason.length, `${where}: every ${a.kind} has a reason`).toBeGreaterThan(0);
          }
        }

        // GPUs held by replicas that still run (or may still run) are never shared.
        const owners = new Map<string, string>();
        for (const r of w.records) {
          if (r.state === 'failed') continue;
          for (const s of r.shards) {
            if (s.state === 'stopped') continue;
            for (const g of s.gpuIndices) {
              const key = `${s.nodeId}/${g}`;
              expect(owners.get(key), `${where}: GPU ${key} given to ${owners.get(key)} and ${r.id}`).toBeUndefined();
              owners.set(key, r.id);
            }
          }
        }

        // New creations never take a model past wanted (a replacement and the replica it replaces fill one slot).
        for (const m of w.models) {
          const createdNew = plan.actions.filter(
            (a) =>
              (a.kind === 'create' && a.replaces === null && a.model === m.name) ||
              (a.kind === 'retry' && a.model === m.name),
          ).length;
          const slotsAfter = slots(w.records, m.name);
          if (createdNew > 0)
            expect(slotsAfter, `${where}: ${m.name} created past wanted ${m.scaling.min}`).toBeLessThanOrEqual(
              m.scaling.min,
            );
          expect(slotsAfter, `${where}: ${m.name} grew past wanted`).toBeLessThanOrEqual(
            Math.max(m.scaling.min, slots(before, m.name)),
          );
        }

        const again = planPass({ ...w.input(), replicas: before, now: w.now }, { maxCreatesPerPass: 1_000 });
        expect(again, `${where}: deterministic`).toEqual(
          planPass({ ...w.input(), replicas: before, now: w.now }, { maxCreatesPerPass: 1_000 }),
        );
        perturb(w, prng);
      }
    }
  });
});
