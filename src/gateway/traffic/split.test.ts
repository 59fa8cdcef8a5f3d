import { describe, expect, it } from 'vitest';
import type { RoutedModel, SplitTarget } from '../ports/index.js';
import { chooseSplit, pickByWeight, sampledForShadow, splitPoint, stickyPoint } from './split.js';

function model(name: string, over: Partial<RoutedModel> = {}): RoutedModel {
  return {
    name,
    aliases: [],
    fallbacks: [],
    routing: 'least-load',
    fallbackWhileCold: false,
    endpoints: ['chat'],
    limits: { contextTokens: null, maxTokens: null, maxN: null },
    ...over,
  };
}

const split = (...t: [string, number][]): SplitTarget[] => t.map(([m, weight]) => ({ model: m, weight }));

describe('pickByWeight: a point in [0, 1) on the weights laid end to end', () => {
  // [weights, point, index, within]
  const table: [number[], number, number, number][] = [
    [[90, 10], 0, 0, 0],
    [[90, 10], 0.45, 0, 0.5],
    [[90, 10], 0.8999, 0, 0.8999 / 0.9],
    [[90, 10], 0.9, 1, 0],
    [[90, 10], 0.95, 1, 0.5],
    [[1, 1, 2], 0.25, 1, 0],
    [[1, 1, 2], 0.75, 2, 0.5],
    [[3], 0.7, 0, 0.7],
  ];
  it.each(table)('weights %j at %d → target %d', (weights, point, index, within) => {
    const got = pickByWeight(weights, point);
    expect(got.index).toBe(index);
    expect(got.within).toBeCloseTo(within, 9);
  });

  it('puts a point of exactly 1 on the last target rather than past the end', () => {
    expect(pickByWeight([90, 10], 1).index).toBe(1);
  });
});

describe('chooseSplit: one target per request', () => {
  const b = model('chat-v2', { aliases: ['next'] });
  const chat = model('chat', { split: split(['chat', 90], ['next', 10]) });
  const catalog = new Map<string, RoutedModel>([
    ['chat', chat],
    ['chat-v2', b],
    ['next', b],
  ]);
  const resolve = (n: string) => catalog.get(n);

  // [point, served by, rule]
  const table: [number, string, string][] = [
    [0.1, 'chat', 'split 90/10 → chat'],
    [0.89, 'chat', 'split 90/10 → chat'],
    [0.9, 'chat-v2', 'split 90/10 → chat-v2'],
    [0.99, 'chat-v2', 'split 90/10 → chat-v2'],
  ];
  it.each(table)('at %d is served by %s ("%s")', (point, served, rule) => {
    const got = chooseSplit(chat, resolve, point);
    expect(got.model.name).toBe(served);
    expect(got.rule).toBe(rule);
  });

  it('sends a model without a split to itself, saying no rule', () => {
    expect(chooseSplit(b, resolve, 0.5)).toEqual({ model: b, rule: null });
  });

  it('leaves out a target that no longer exists or cannot serve the request, the rest taking its share', () => {
    const gone = model('x', { split: split(['ghost', 50], ['chat-v2', 50]) });
    expect(chooseSplit(gone, resolve, 0.1).model.name).toBe('chat-v2');
    const notServing = chooseSplit(chat, resolve, 0.95, (m) => m.name !== 'chat-v2');
    expect(notServing).toEqual({ model: chat, rule: 'split 90 → chat' });
  });

  it('serves the named model when no target is left', () => {
    const lonely = model('x', { split: split(['ghost', 1]) });
    expect(chooseSplit(lonely, resolve, 0.5)).toEqual({ model: lonely, rule: null });
  });

  it('splits a target that splits again with the part of the point inside its span', () => {
    const a1 = model('a1');
    const a2 = model('a2');
    const a = model('a', { split: split(['a1', 1], ['a2', 1]) });
    const top = model('top', { split: split(['a', 1], ['chat-v2', 1]) });
    const more = new Map([...catalog, ['a', a], ['a1', a1], ['a2', a2], ['top', top]]);
    // 0.3 is 60% into a's half: a2.
    const got = chooseSplit(top, (n) => more.get(n), 0.3);
    expect(got.model.name).toBe('a2');
    expect(got.rule).toBe('split 1/1 → a, split 1/1 → a2');
  });

  it('stops at a cycle the catalog should have refused, instead of looping', () => {
    const p = model('p', { split: split(['q', 1]) });
    const q = model('q', { split: split(['p', 1]) });
    const loop = new Map([
      ['p', p],
      ['q', q],
    ]);
    expect(['p', 'q']).toContain(chooseSplit(p, (n) => loop.get(n), 0.5).model.name);
  });

  it('draws 90/10 within a percent over many uniform points', () => {
    let v2 = 0;
    const n = 10_000;
    for (let i = 0; i < n; i++) if (chooseSplit(chat, resolve, (i + 0.5) / n).model === b) v2++;
    expect(v2 / n).toBeCloseTo(0.1, 2);
  });
});

describe('splitPoint: sticky by key or user, random otherwise', () => {
  const never = () => {
    throw new Error('a sticky split must not draw');
  };
  it('keeps a key on one point, different keys spread', () => {
    const one = splitPoint('chat', 'key', { keyId: 'k1' }, never);
    expect(splitPoint('chat', 'key', { keyId: 'k1' }, never)).toBe(one);
    const points = new Set(Array.from({ length: 50 }, (_, i) => splitPoint('chat', 'key', { keyId: `k${i}` }, never)));
    expect(points.size).toBe(50);
    for (const p of points) expect(p >= 0 && p < 1).toBe(true);
  });

  it('keys a user split by the body user, falling back to the key, then to a draw', () => {
    expect(splitPoint('chat', 'user', { keyId: 'k', user: 'alice' }, never)).toBe(stickyPoint('chat', 'user:alice'));
    expect(splitPoint('chat', 'user', { keyId: 'k' }, never)).toBe(stickyPoint('chat', 'key:k'));
    expect(splitPoint('chat', 'user', {}, () => 0.25)).toBe(0.25);
  });

  it('draws per request when split_by is request (or absent), even with a key', () => {
    expect(splitPoint('chat', 'request', { keyId: 'k' }, () => 0.7)).toBe(0.7);
    expect(splitPoint('chat', undefined, { keyId: 'k' }, () => 0.3)).toBe(0.3);
  });
});

describe('sampledForShadow', () => {
  const shadowed = model('chat', { shadow: { model: 'c', share: 0.05, maxConcurrent: 4, timeoutMs: 1000 } });
  it.each([
    [0.01, true],
    [0.0499, true],
    [0.05, false],
    [0.9, false],
  ])('copies a draw of %d: %s', (draw, copied) => {
    expect(sampledForShadow(shadowed, () => draw)).toBe(copied);
  });
  it('never copies a model without a shadow', () => {
    expect(sampledForShadow(model('plain'), () => 0)).toBe(false);
  });
});
