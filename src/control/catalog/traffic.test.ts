import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../errors/index.js';
import { Store } from '../store/index.js';
import { Catalog, loadCatalogFile } from './catalog.js';
import { SHADOW_DEFAULTS } from './traffic.js';

const def = (name: string, over: Record<string, unknown> = {}) => ({
  name,
  source: 'hf://Qwen/Qwen2.5-0.5B-Instruct',
  profiles: [{ engine: 'sim' }],
  ...over,
});

async function catalogWith(...models: Record<string, unknown>[]): Promise<Catalog> {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-traffic-'));
  const store = await Store.open({ location: { kind: 'sqlite', path: join(dir, 'db') } });
  const catalog = await Catalog.create({ store });
  for (const m of models) await catalog.add(m, 'test');
  return catalog;
}

function problemsOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    if (err instanceof ValidationError) return err.message;
    throw err;
  }
  throw new Error('no problem was found');
}

describe('splits and shadows in the catalog: one message per problem, saying what to fix', () => {
  // [what is wrong, definition of "chat" (b exists), a piece of the message]
  const table: [string, Record<string, unknown>, string][] = [
    ['a weight of 0', def('chat', { split: [{ model: 'b', weight: 0 }] }), 'want a weight above 0'],
    ['a negative weight', def('chat', { split: [{ model: 'b', weight: -5 }] }), 'want a weight above 0'],
    ['an empty split', def('chat', { split: [] }), 'a split needs at least one target'],
    [
      'a target twice',
      def('chat', {
        split: [
          { model: 'b', weight: 1 },
          { model: 'b', weight: 2 },
        ],
      }),
      'listed twice',
    ],
    ['only itself', def('chat', { split: [{ model: 'chat', weight: 1 }] }), 'the only target is the model itself'],
    ['a missing target', def('chat', { split: [{ model: 'ghost', weight: 1 }] }), '"ghost" names no model'],
    ['a typo in a target key', def('chat', { split: [{ modle: 'b', weight: 1 }] }), 'did you mean "model"?'],
    ['split_by without split', def('chat', { split_by: 'key' }), 'the model has no split'],
    ['an unknown split_by', def('chat', { split: [{ model: 'b', weight: 1 }], split_by: 'ip' }), 'request, key, user'],
    ['a shadow share of 0', def('chat', { shadow: { model: 'b', share: 0 } }), 'want a share above 0'],
    ['a shadow share over 1', def('chat', { shadow: { model: 'b', share: 5 } }), 'at most 1'],
    ['a shadow of itself', def('chat', { shadow: { model: 'chat', share: 0.1 } }), 'cannot shadow itself'],
    ['a missing candidate', def('chat', { shadow: { model: 'ghost', share: 0.1 } }), '"ghost" names no model'],
    ['a shadow timeout of 0', def('chat', { shadow: { model: 'b', share: 0.1, timeout: '0s' } }), 'above 0'],
  ];
  it.each(table)('%s', async (_what, definition, expected) => {
    const catalog = await catalogWith(def('b'));
    expect(problemsOf(() => catalog.validate(definition))).toContain(expected);
  });

  it('refuses a split that leads back round to itself in the catalog file, naming the cycle', () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-traffic-file-'));
    const file = join(dir, 'catalog.yaml');
    const yaml = (m: Record<string, unknown>) => JSON.stringify(m);
    writeFileSync(
      file,
      [
        `- ${yaml(
          def('a', {
            split: [
              { model: 'a', weight: 9 },
              { model: 'b', weight: 1 },
            ],
          }),
        )}`,
        `- ${yaml(
          def('b', {
            split: [
              { model: 'c', weight: 1 },
              { model: 'b', weight: 1 },
            ],
          }),
        )}`,
        `- ${yaml(def('c', { split: [{ model: 'a', weight: 1 }] }))}`,
      ].join('\n'),
    );
    const message = problemsOf(() => loadCatalogFile(file));
    expect(message).toContain('split: a cycle a -> b -> c -> a');
  });

  it('takes a canary split that names the model itself and an alias, and a shadow, defaults filled', async () => {
    const catalog = await catalogWith(def('chat-v2', { aliases: ['next'] }), def('candidate'));
    const model = catalog.validate(
      def('chat', {
        split: [
          { model: 'chat', weight: 90 },
          { model: 'next', weight: 10 },
        ],
        split_by: 'user',
        shadow: { model: 'candidate', share: 0.05 },
      }),
    );
    expect(model.split).toEqual([
      { model: 'chat', weight: 90 },
      { model: 'next', weight: 10 },
    ]);
    expect(model.splitBy).toBe('user');
    expect(model.shadow).toEqual({
      model: 'candidate',
      share: 0.05,
      maxConcurrent: SHADOW_DEFAULTS.maxConcurrent,
      timeoutMs: SHADOW_DEFAULTS.timeoutMs,
    });
  });

  it('leaves a model without rules as it was: no split, no shadow, and nothing added to its definition', async () => {
    const catalog = await catalogWith();
    const model = catalog.validate(def('plain'));
    expect([model.split, model.shadow, model.splitBy]).toEqual([null, null, 'request']);
    expect(Object.keys(model.definition)).not.toContain('split_by');
  });

  it('refuses to remove a model a split or shadow still sends requests to', async () => {
    const catalog = await catalogWith(def('b', { aliases: ['bee'] }), def('c'));
    await catalog.add(
      def('chat', {
        split: [
          { model: 'chat', weight: 1 },
          { model: 'bee', weight: 1 },
        ],
      }),
      'test',
    );
    await catalog.add(def('other', { shadow: { model: 'c', share: 0.5 } }), 'test');
    await expect(catalog.remove('b', 'test')).rejects.toThrow('model "b" is a split target or shadow of "chat"');
    await expect(catalog.remove('c', 'test')).rejects.toThrow('shadow of "other"');
    await catalog.remove('other', 'test');
    await catalog.remove('c', 'test');
  });
});
