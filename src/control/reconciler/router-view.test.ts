import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { ModelRejections } from './plan-types.js';
import { RouterView, type RouterViewDeps } from './router-view.js';
import type { ReplicaRecord, ReplicaState } from './types.js';
import type { ReplicaLoad } from '../../gateway/index.js';
import { replicaRecord } from '../../../test/support/reconciler-records.js';

const replica = (id: string, state: ReplicaState, over: Partial<ReplicaRecord> = {}): ReplicaRecord =>
  replicaRecord(id, { state, ...over });

const blocked: ModelRejections = {
  model: 'm',
  purpose: 'scale',
  rejections: [{ profile: 'p', node: 'n1', code: 'no_gpus', dimension: 'gpus', reason: 'node n1 has no free GPU' }],
  notes: [],
  nodeCount: 1,
  modelKey: 'k',
  atMs: 0,
  contended: false,
};

/** A view over records the test sets, with what it asks back counted. */
function world(over: Partial<RouterViewDeps> = {}) {
  const w = {
    records: [] as ReplicaRecord[],
    rejections: undefined as ModelRejections | undefined,
    scaling: { min: 0, max: 2 } as { min: number; max: number } | undefined,
    onDemand: true,
    cold: [] as string[],
    notified: 0,
  };
  const view = new RouterView({
    records: () => w.records,
    explain: () => w.rejections,
    scaling: () => w.scaling,
    engineOf: (_model, profile) => (profile === 'gone' ? undefined : 'sim'),
    scalesOnDemand: () => w.onDemand,
    wantCold: (model) => w.cold.push(model),
    notify: () => w.notified++,
    logger: pino({ level: 'silent' }),
    ...over,
  });
  return { w, view };
}

describe('RouterView.ready', () => {
  it('lists ready and draining replicas with an endpoint, carrying the engine secret and engine only when known', () => {
    const { w, view } = world();
    w.records = [
      replica('a', 'ready', { endpoint: 'http://a', engineSecret: 's' }),
      replica('b', 'draining', { endpoint: 'http://b', engineSecret: null, profile: 'gone' }),
      replica('c', 'ready'),
      replica('d', 'starting', { endpoint: 'http://d' }),
      replica('e', 'ready', { model: 'other', endpoint: 'http://e' }),
    ];
    expect(view.ready('m')).toEqual([
      { id: 'a', endpoint: 'http://a', draining: false, engineSecret: 's', engine: 'sim' },
      { id: 'b', endpoint: 'http://b', draining: true },
    ]);
  });

  it('reads the records again only after changed(), and then tells every listener', () => {
    const { w, view } = world();
    const first = view.ready('m');
    w.records = [replica('a', 'ready', { endpoint: 'http://a' })];
    expect(view.ready('m'), 'cached until the records are said to change').toBe(first);
    let heard = 0;
    const unsubscribe = view.subscribe(() => heard++);
    view.subscribe(() => {
      throw new Error('a listener that throws does not stop the others');
    });
    view.changed();
    expect(heard).toBe(1);
    expect(view.ready('m').map((r) => r.id)).toEqual(['a']);
    unsubscribe();
    view.changed();
    expect(heard, 'unsubscribed').toBe(1);
  });

  it('rebuilds, after a load change, only the models of the replicas named', () => {
    const loads = new Map<string, ReplicaLoad>([
      ['a', { running: 1, waiting: 0, sampledAtMs: 1 }],
      ['e', { running: 1, waiting: 0, sampledAtMs: 1 }],
    ]);
    const { w, view } = world({ load: (id) => loads.get(id) });
    w.records = [
      replica('a', 'ready', { endpoint: 'http://a' }),
      replica('e', 'ready', { model: 'other', endpoint: 'http://e' }),
    ];
    const running = (model: string) => view.ready(model)[0]!.load!.running;
    expect([running('m'), running('other')]).toEqual([1, 1]);
    loads.set('a', { running: 5, waiting: 0, sampledAtMs: 2 });
    loads.set('e', { running: 7, waiting: 0, sampledAtMs: 2 });
    view.loadsChanged(['a', 'gone']);
    expect(running('m'), "a's model is read again").toBe(5);
    expect(running('other'), 'a model whose loads were not named keeps its list').toBe(1);
    view.loadsChanged(['e']);
    expect(running('other'), 'named in turn, it is read again').toBe(7);
  });

  it('reads a new array of records by model, without a change being said, for describe and demand', () => {
    const { w, view } = world();
    w.records = [replica('s', 'starting', { model: 'other' })];
    expect(view.describe('m')).toBe('no replica is wanted (scaling min 0)');
    w.records = [replica('s', 'starting'), replica('f', 'failed', { model: 'other' })];
    expect(view.describe('m')).toBe('1 starting');
    expect(view.describe('other')).toMatch(/^replica f failed/);
  });
});

describe('RouterView.describe', () => {
  const cases: { name: string; set: (w: ReturnType<typeof world>['w']) => void; says: string | RegExp }[] = [
    {
      name: 'counting replicas by state',
      set: (w) => (w.records = [replica('a', 'pending'), replica('b', 'fetching'), replica('c', 'pending')]),
      says: '2 pending, 1 fetching',
    },
    {
      name: 'a failed replica and its error',
      set: (w) => (w.records = [replica('a', 'failed', { error: 'oom' })]),
      says: 'replica a failed: oom',
    },
    {
      name: 'a failed replica without an error',
      set: (w) => (w.records = [replica('a', 'failed')]),
      says: 'replica a failed: no error reported',
    },
    {
      name: 'a model placement rejected',
      set: (w) => (w.rejections = blocked),
      says: 'none can be placed (1 rejection(s); first: node n1 has no free GPU); see explain-placement',
    },
    { name: 'min 0', set: () => {}, says: 'no replica is wanted (scaling min 0)' },
    {
      name: 'a model not in the catalog',
      set: (w) => (w.scaling = undefined),
      says: 'no replica is wanted (scaling min 0)',
    },
    {
      name: 'min 1, nothing placed yet',
      set: (w) => (w.scaling = { min: 1, max: 1 }),
      says: 'the reconciler has not placed one yet',
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const { w, view } = world();
      c.set(w);
      expect(view.describe('m')).toEqual(c.says);
    });
  }
});

describe('RouterView.demand', () => {
  const cases: { name: string; set: (w: ReturnType<typeof world>['w']) => void; coming: boolean; cold: boolean }[] = [
    { name: 'a replica on its way', set: (w) => (w.records = [replica('a', 'starting')]), coming: true, cold: false },
    { name: 'a model at zero that scales on demand', set: () => {}, coming: true, cold: true },
    { name: 'no demand source: min 0 stays at zero', set: (w) => (w.onDemand = false), coming: false, cold: false },
    {
      name: 'no demand source, min 1',
      set: (w) => ((w.onDemand = false), (w.scaling = { min: 1, max: 1 })),
      coming: true,
      cold: false,
    },
    { name: 'max 0', set: (w) => (w.scaling = { min: 0, max: 0 }), coming: false, cold: false },
    {
      name: 'fits nowhere',
      set: (w) => ((w.rejections = blocked), (w.scaling = { min: 1, max: 2 })),
      coming: false,
      cold: false,
    },
    { name: 'not in the catalog', set: (w) => (w.scaling = undefined), coming: false, cold: false },
  ];
  for (const c of cases) {
    it(`${c.coming ? 'holds the request' : 'says none will come'}: ${c.name}`, () => {
      const { w, view } = world();
      c.set(w);
      expect(view.demand('m')).toBe(c.coming);
      expect(w.cold, 'asks the next pass for one').toEqual(c.cold ? ['m'] : []);
      expect(w.notified, 'a pass runs soon either way').toBe(1);
    });
  }
});
