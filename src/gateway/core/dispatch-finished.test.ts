// Guards the bulk trimming of a replica's finished attempts (replicaUse's
// list, read by least-load): trimmed one entry per attempt, every attempt
// moved the whole list (thousands of entries at a few hundred requests a
// second); trimmed in bulk, the entries kept past their time must change
// no count least-load reads, and the list must stay bounded.
import { describe, expect, it } from 'vitest';
import { compileModel, ModelSchema } from '../../control/catalog/index.js';
import { FINISHED_TRIM_BATCH, replicaUse, trimFinished, type Attempt, type Dispatch } from './dispatch.js';
import { loadViewOf } from './pick.js';
import { parseRequest } from './validate.js';

const m = compileModel(
  ModelSchema.parse({ name: 'm', source: 'file:///models/m', profiles: [{ engine: 'sim' }] }),
  'file',
);
const raw = Buffer.from('{"model":"m","messages":[{"role":"user","content":"hi"}]}');
const parsed = parseRequest('chat', raw, { maxN: 16, maxTokens: 1000 });
const attempt = (): Attempt => ({
  ex: { id: 'req-1', parsed, raw, requested: m, startedAt: 0, dispatched: false, usageRefused: false },
  model: m,
  replica: { id: 'r1', endpoint: 'http://127.0.0.1:1', draining: false },
  path: '/v1/chat/completions',
  passThrough: false,
  body: raw,
  headers: {},
});

const ends = (...endMs: number[]) => endMs.map((e) => ({ startMs: e - 1, endMs: e }));

describe('trimFinished', () => {
  it('keeps a list shorter than a batch as it is, however old', () => {
    const done = ends(1, 2, 3);
    trimFinished(done, 100);
    expect(done).toHaveLength(3);
  });

  it('waits until a whole batch is past its time', () => {
    const done = ends(...Array.from({ length: FINISHED_TRIM_BATCH }, (_, i) => i));
    trimFinished(done, FINISHED_TRIM_BATCH - 1);
    expect(done).toHaveLength(FINISHED_TRIM_BATCH);
  });

  it('then drops every entry past its time, and none after it', () => {
    const done = ends(...Array.from({ length: FINISHED_TRIM_BATCH + 10 }, (_, i) => i));
    trimFinished(done, FINISHED_TRIM_BATCH + 5);
    expect(done.map((d) => d.endMs)).toEqual([261, 262, 263, 264, 265].map((x) => x + FINISHED_TRIM_BATCH - 256));
  });
});

describe('replicaUse with bulk trimming', () => {
  it('keeps the list bounded and least-load reads the same counts as an exact trim would', async () => {
    const keepMs = 4_000;
    let clock = 0;
    const sends = new Map<string, number[]>();
    const finished = new Map<string, { startMs: number; endMs: number }[]>();
    // Attempt i is sent at 2i ms and answered 30 ms later (500 a second, about 2,000 in the window): ends come in order.
    const base: Dispatch = async () => {
      clock += 30;
      return { kind: 'done', status: 200 };
    };
    const dispatch = replicaUse({ sends, finished, keepFinishedMs: keepMs, now: () => clock })(base);
    const exact: { startMs: number; endMs: number }[] = [];
    let counted = 0;
    for (let i = 0; i < 6_000; i++) {
      clock = 2 * i;
      await dispatch(attempt());
      exact.push({ startMs: 2 * i, endMs: clock });
      while (exact.length > 0 && exact[0]!.endMs < clock - keepMs) exact.shift();
      if (i % 97 === 0) {
        // A sample taken at any moment of the window reads the same count from the bulk-trimmed list as from the exact one.
        for (const age of [0, 10, 500, 3_999, 4_000]) {
          const sample = { running: 3, waiting: 0, sampledAtMs: clock - age };
          const got = loadViewOf(sample, [], clock, keepMs, finished.get('r1'));
          const want = loadViewOf(sample, [], clock, keepMs, exact);
          expect(got).toEqual(want);
          counted += got.sample?.finishedSince ?? 0;
        }
      }
    }
    // The samples did see finished attempts: the comparison above was not of zeros.
    expect(counted).toBeGreaterThan(100);
    expect(finished.get('r1')!.length).toBeLessThanOrEqual(exact.length + FINISHED_TRIM_BATCH);
    expect(finished.get('r1')!.length).toBeGreaterThanOrEqual(exact.length);
  });
});
