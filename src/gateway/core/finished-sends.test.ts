// Guards FinishedSends, the attempts least-load takes off an engine's last
// sample: its count for a sample's moment, kept and moved as attempts end
// rather than walked per request, must always be what walking every attempt
// would give; its bulk trimming must change no count that is read; and the
// list must stay bounded.
import { describe, expect, it } from 'vitest';
import { compileModel, ModelSchema } from '../../control/catalog/index.js';
import { replicaUse, type Attempt, type Dispatch } from './dispatch.js';
import { FINISHED_TRIM_BATCH, FinishedSends } from './finished-sends.js';
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

/** Attempts that took 1 ms each, ending at `endMs`, added in order. */
function ended(keepMs: number, ...endMs: number[]): FinishedSends {
  const f = new FinishedSends(keepMs);
  for (const e of endMs) f.add(e - 1, e);
  return f;
}

/** The count by walking every attempt: what the kept count must equal. */
function walked(all: readonly { startMs: number; endMs: number }[], at: number): number {
  return all.filter((a) => a.startMs <= at && a.endMs > at).length;
}

describe('FinishedSends', () => {
  it('counts only the sends a sample saw that ended after it', () => {
    const f = new FinishedSends(4_000);
    f.add(9_000, 9_900); // ended before the sample: not in it
    f.add(9_000, 10_500); // in the sample, gone since
    f.add(10_000, 10_100); // sent at the sample's moment: in it, gone since
    f.add(10_200, 10_400); // sent after the sample and gone: never in it
    expect(f.finishedSince(10_000)).toBe(2);
    expect(f.finishedSince(9_500)).toBe(2);
    expect(f.finishedSince(20_000)).toBe(0);
  });

  it('moves the count of the moment asked as attempts end after it', () => {
    const f = new FinishedSends(4_000);
    expect(f.finishedSince(10_000)).toBe(0);
    f.add(9_000, 10_001);
    f.add(10_001, 10_002); // sent after the moment
    f.add(8_000, 10_003);
    expect(f.finishedSince(10_000)).toBe(2);
  });

  it('keeps a list shorter than a batch as it is, however old', () => {
    const f = ended(10, 1, 2, 3);
    f.add(1_000, 1_001);
    expect(f.size).toBe(4);
  });

  it('waits until a whole batch is past its time', () => {
    const f = ended(1, ...Array.from({ length: FINISHED_TRIM_BATCH }, (_, i) => i));
    // The next end drops what ended before FINISHED_TRIM_BATCH - 1: one short of a batch.
    f.add(FINISHED_TRIM_BATCH - 1, FINISHED_TRIM_BATCH);
    expect(f.size).toBe(FINISHED_TRIM_BATCH + 1);
  });

  it('then drops every attempt past its time, and none after it', () => {
    const f = ended(1_000, ...Array.from({ length: FINISHED_TRIM_BATCH + 10 }, (_, i) => i));
    // Ending at FINISHED_TRIM_BATCH + 1_005 drops every attempt that ended before FINISHED_TRIM_BATCH + 5.
    f.add(FINISHED_TRIM_BATCH + 1_004, FINISHED_TRIM_BATCH + 1_005);
    expect(f.size).toBe(5 + 1);
    expect(f.finishedSince(FINISHED_TRIM_BATCH + 4), 'the attempt that ended at +5 ran at +4').toBe(1);
    expect(f.finishedSince(FINISHED_TRIM_BATCH + 3), 'the one that ended at +4 is gone with the rest').toBe(0);
  });

  /** 5,000 attempts, long ones among short ones (so a moment spans many); ends in order, sends not. */
  function* attempts(): Generator<{ startMs: number; endMs: number }> {
    let seed = 7;
    const next = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    let clock = 0;
    for (let i = 0; i < 5_000; i++) {
      clock += Math.floor(next() * 3);
      yield { startMs: clock - Math.floor(next() * (next() < 0.1 ? 400 : 20)), endMs: clock };
    }
  }

  it.each([
    ['a sample renewed every 150 attempts (always fresh)', 150],
    ['a sample kept past keepMs (the attempts it counted are dropped)', 3_000],
  ])(
    'keeps the count of a moment asked after every end as walking the kept attempts gives: %s',
    (_name, renewEvery) => {
      const keepMs = 300;
      const f = new FinishedSends(keepMs);
      const kept: { startMs: number; endMs: number }[] = [];
      let at = 0;
      let seen = 0;
      let i = 0;
      let dropped: { endMs: number } | undefined;
      for (const a of attempts()) {
        f.add(a.startMs, a.endMs);
        kept.push(a);
        while (kept.length > f.size) dropped = kept.shift();
        // Nothing that ended in the last keepMs is dropped, and fewer than a batch past it stay.
        expect(dropped?.endMs ?? -Infinity).toBeLessThan(a.endMs - keepMs);
        expect(kept.filter((k) => k.endMs < a.endMs - keepMs).length).toBeLessThan(FINISHED_TRIM_BATCH);
        if (i++ % renewEvery === 0) at = a.endMs - 20;
        expect(f.finishedSince(at), `at ${at} after ${i} attempts`).toBe(walked(kept, at));
        seen += f.finishedSince(at);
      }
      // The moments asked did see attempts: the comparison above was not of zeros.
      expect(seen).toBeGreaterThan(1_000);
      expect(f.size).toBeLessThanOrEqual(FINISHED_TRIM_BATCH + 1_000);
    },
  );

  it('reads, for moments asked in any order, what walking every attempt kept reads', () => {
    const f = new FinishedSends(300);
    const kept: { startMs: number; endMs: number }[] = [];
    let i = 0;
    for (const a of attempts()) {
      f.add(a.startMs, a.endMs);
      kept.push(a);
      while (kept.length > f.size) kept.shift();
      if (i++ % 13 !== 0) continue;
      for (const age of [0, 5, 5, 120, 300, 350, 5])
        expect(f.finishedSince(a.endMs - age)).toBe(walked(kept, a.endMs - age));
    }
  });
});

describe('replicaUse with FinishedSends', () => {
  it('keeps the list bounded and least-load reads the same counts as from every attempt of the window', async () => {
    const keepMs = 4_000;
    let clock = 0;
    const sends = new Map<string, number[]>();
    const finished = new Map<string, FinishedSends>();
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
        // A sample taken at any moment of the window reads the same count as walking the exact window would.
        for (const age of [0, 10, 500, 3_999, 4_000]) {
          const sample = { running: 3, waiting: 0, sampledAtMs: clock - age };
          const got = loadViewOf(sample, [], clock, keepMs, finished.get('r1'));
          const finishedSince = walked(exact, sample.sampledAtMs);
          expect(got.sample?.finishedSince ?? 0).toBe(finishedSince);
          counted += finishedSince;
        }
      }
    }
    // The samples did see finished attempts: the comparison above was not of zeros.
    expect(counted).toBeGreaterThan(100);
    expect(finished.get('r1')!.size).toBeLessThanOrEqual(exact.length + FINISHED_TRIM_BATCH);
    expect(finished.get('r1')!.size).toBeGreaterThanOrEqual(exact.length);
  });
});
