import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { NewEvent } from '../events/events.js';
import type { DemandSnapshot, ScalingPolicy } from '../scaling/index.js';
import { type ScalableModel, ScalingBridge, scaleSignals } from './scaling-bridge.js';
import type { ReplicaRecord, ReplicaState } from './types.js';

function replica(id: string, state: ReplicaState, over: Partial<ReplicaRecord> = {}): ReplicaRecord {
  return {
    id,
    model: 'm',
    profile: 'p',
    pool: null,
    fabric: null,
    state,
    endpoint: null,
    error: null,
    createdAtMs: 100,
    lastUsedAtMs: null,
    failures: 0,
    nextRetryAtMs: null,
    stateSinceMs: 200,
    updatedAtMs: 0,
    replaces: null,
    shards: [],
    ...over,
  };
}

const policy: ScalingPolicy = { min: 0, max: 4, targetInflight: 1, idleTimeoutMs: null, windowMs: 0, cooldownMs: 0 };
const models: ScalableModel[] = [{ name: 'm', scaling: policy }];

describe('scaleSignals', () => {
  it('weighs counting replicas, counts failed ones, and leaves out draining and stopping ones', () => {
    const records = [
      replica('r', 'ready'),
      replica('s', 'starting'),
      replica('f', 'failed'),
      replica('d', 'draining'),
      replica('x', 'stopping'),
    ];
    const signals = scaleSignals(records, new Map([['r', 3]]), 0);
    expect(signals.get('m')).toEqual({
      replicas: [
        { id: 'r', ready: true, inFlight: 3, idleSinceMs: 200 },
        { id: 's', ready: false, inFlight: 0, idleSinceMs: 100 },
      ],
      failed: 1,
    });
  });

  it('counts a replica being moved and its replacement as one, until the old one drains', () => {
    const moving = [replica('old', 'ready'), replica('new', 'starting', { replaces: 'old' })];
    expect(
      scaleSignals(moving, new Map(), 0)
        .get('m')!
        .replicas.map((r) => r.id),
    ).toEqual(['old']);
    const drained = [replica('old', 'draining'), replica('new', 'ready', { replaces: 'old' })];
    expect(
      scaleSignals(drained, new Map(), 0)
        .get('m')!
        .replicas.map((r) => r.id),
    ).toEqual(['new']);
  });

  const idle: { name: string; over: Partial<ReplicaRecord>; state: ReplicaState; since: number; want: number }[] = [
    { name: 'a ready replica never used: since it became ready', over: {}, state: 'ready', since: 0, want: 200 },
    {
      name: 'a replica used later: since its last use',
      over: { lastUsedAtMs: 900 },
      state: 'ready',
      since: 0,
      want: 900,
    },
    { name: 'a replica still starting: since it was made', over: {}, state: 'starting', since: 0, want: 100 },
    {
      name: 'before this process read demand: since it began',
      over: { lastUsedAtMs: 900 },
      state: 'ready',
      since: 5000,
      want: 5000,
    },
  ];
  for (const c of idle) {
    it(`idle since: ${c.name}`, () => {
      expect(scaleSignals([replica('r', c.state, c.over)], new Map(), c.since).get('m')!.replicas[0]!.idleSinceMs).toBe(
        c.want,
      );
    });
  }
});

describe('ScalingBridge', () => {
  function bridge(startMs = 1_000) {
    let clock = startMs;
    const events: NewEvent[] = [];
    const errors: unknown[] = [];
    const logger = pino({ level: 'error' }, { write: (line: string) => errors.push(JSON.parse(line)) });
    const b = new ScalingBridge({ now: () => clock, logger, events: { record: (e) => void events.push(e) } });
    return { b, events, errors, advance: (ms: number) => (clock += ms) };
  }

  it('reads nothing and decides nothing without a demand source', () => {
    const { b } = bridge();
    expect(b.attached).toBe(false);
    expect(b.read()).toBeUndefined();
  });

  it('records the use it reads, and lays last uses over the records, the newer kept', () => {
    const { b } = bridge();
    const snapshot: DemandSnapshot = {
      replicas: new Map([
        ['a', { inFlight: 2, lastUsedAtMs: 500 }],
        ['b', { inFlight: 0, lastUsedAtMs: null }],
      ]),
      queued: new Map(),
    };
    b.attach(() => snapshot);
    expect(b.read()).toBe(snapshot);
    expect([...b.inFlight]).toEqual([
      ['a', 2],
      ['b', 0],
    ]);
    const [a, older, never] = b.withLastUsed([
      replica('a', 'ready'),
      replica('a', 'ready', { lastUsedAtMs: 600 }),
      replica('b', 'ready'),
    ]);
    expect(a!.lastUsedAtMs).toBe(500);
    expect(older!.lastUsedAtMs, 'a newer stored use is not undone').toBe(600);
    expect(never!.lastUsedAtMs, 'null = never used: nothing to lay over').toBeNull();
    b.forget(['a']);
    expect(b.withLastUsed([replica('a', 'ready')])[0]!.lastUsedAtMs, 'forgotten with its replica').toBeNull();
  });

  it('copies the records only when a reported use is newer than its record', () => {
    const { b } = bridge();
    const records = [replica('a', 'ready', { lastUsedAtMs: 600 }), replica('b', 'ready')];
    expect(b.withLastUsed(records), 'nothing reported').toBe(records);
    b.report('a', { inFlight: 0, lastUsedAtMs: 500 });
    expect(b.withLastUsed(records), 'older than the stored use').toBe(records);
    b.report('b', { inFlight: 1, lastUsedAtMs: 700 });
    const next = b.withLastUsed(records);
    expect(next).not.toBe(records);
    expect(next[0], 'a record with no newer use is passed on as it is').toBe(records[0]);
    expect(next[1]!.lastUsedAtMs).toBe(700);
    expect(records[1]!.lastUsedAtMs, 'the records given are left as they were').toBeNull();
  });

  it('keeps the previous wanted numbers when the source throws, and says so', () => {
    const { b, errors } = bridge();
    b.attach(() => ({ replicas: new Map(), queued: new Map([['m', 1]]) }));
    b.wantCold('m');
    expect(b.decide(1_000, [], models, new Map()).get('m')).toBe(1);
    b.attach(() => {
      throw new Error('router gone');
    });
    expect(b.read()).toBeNull();
    expect(b.lastWanted()).toEqual(new Map([['m', 1]]));
    expect(errors).toMatchObject([
      { msg: "reading the router's demand failed; this pass keeps the previous wanted numbers" },
    ]);
  });

  it('starts one replica for cold demand, records the decision, and uses the cold demand up', () => {
    const { b, events } = bridge();
    b.attach(() => ({ replicas: new Map(), queued: new Map() }));
    b.wantCold('m');
    expect(b.decide(1_000, [], models, new Map()).get('m')).toBe(1);
    expect(events).toMatchObject([{ kind: 'scale', model: 'm', from: 0, to: 1 }]);
    expect(events[0]!.message).toMatch(/^m: 0 → 1 replica\(s\): /);
    // The replica it asked for is placed; no further cold demand: wanted stays.
    expect(b.decide(2_000, [replica('r', 'pending')], models, new Map()).get('m')).toBe(1);
    expect(events, 'no change, no event').toHaveLength(1);
  });

  it('forgets a model gone from the catalog, and all of its memory when it begins leading', () => {
    const { b } = bridge();
    b.attach(() => ({ replicas: new Map(), queued: new Map() }));
    b.wantCold('m');
    b.decide(1_000, [], models, new Map());
    b.decide(2_000, [], [], new Map());
    expect(b.lastWanted().has('m'), 'a model removed starts afresh').toBe(false);
    b.wantCold('m');
    b.decide(3_000, [], models, new Map());
    b.report('r', { inFlight: 1, lastUsedAtMs: 10 });
    b.reset();
    expect(b.lastWanted().size).toBe(0);
    expect(b.inFlight.size).toBe(0);
    expect(b.decide(4_000, [], models, new Map()).get('m'), 'the cold demand went with it').toBe(0);
  });

  it('gives every replica the whole idle timeout again when it begins leading', () => {
    const { b, advance } = bridge(0);
    const idlePolicy: ScalableModel[] = [{ name: 'm', scaling: { ...policy, min: 0, idleTimeoutMs: 60_000 } }];
    b.attach(() => ({ replicas: new Map(), queued: new Map() }));
    const records = [replica('r', 'ready', { stateSinceMs: 0 })];
    b.decide(0, records, idlePolicy, new Map());
    advance(50_000);
    b.reset();
    expect(
      b.decide(70_000, records, idlePolicy, new Map()).get('m'),
      'idle 70 s, but only 20 s since it began leading',
    ).toBe(1);
    expect(b.decide(110_000, records, idlePolicy, new Map()).get('m'), 'a whole idle_timeout after').toBe(0);
  });
});
