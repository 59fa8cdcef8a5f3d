// Remote models and spill-over in the catalog: a remote needs no source and
// runs nothing, its API key is never part of what is kept or shown, and the
// mistakes an operator can make are refused in words that say what to fix.
import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { validateAgainst } from './catalog.js';
import type { Model } from './model.js';

const CANARY = 'sk-canary-remote-1f2e3d';
const remoteDef = (extra: Record<string, unknown> = {}) => ({
  name: 'big-remote',
  profiles: [{ engine: 'remote', remote: { url: 'https://api.example.com/', model: 'gpt-x', api_key: CANARY } }],
  ...extra,
});
const check = (input: unknown, existing: Model[] = []) => validateAgainst(input, existing, 'store', {});

describe('remote models in the catalog', () => {
  it('compiles a remote model with no source, no profile to place and no replica wanted', () => {
    const m = check(remoteDef());
    expect(m.profiles).toEqual([]);
    expect(m.scaling.min).toBe(0);
    expect(m.scaling.max).toBe(0);
    expect(m.remote?.url).toBe('https://api.example.com');
    expect(m.remote?.servedModel).toBe('gpt-x');
    expect(m.remote?.key.kind).toBe('inline');
    expect(m.endpoints).toEqual(['chat', 'completions', 'embeddings']);
  });

  it.each(['responses', 'anthropic'] as const)('compiles a remote speaking %s: chat alone, translated', (api) => {
    const m = check(
      remoteDef({ profiles: [{ engine: 'remote', remote: { url: 'https://h', api, api_key: CANARY } }] }),
    );
    expect(m.remote?.api).toBe(api);
    expect(m.remote?.traits).toMatchObject({ kind: 'endpoint', api });
    // No completions or embeddings: neither API has them, and the gateway translates chat alone.
    expect(m.endpoints).toEqual(['chat']);
  });

  it('sends a chat remote chat, with no api in its traits', () => {
    expect(check(remoteDef()).remote?.traits.api).toBeUndefined();
  });

  it('keeps and shows the API key as `set`, however the model is printed', () => {
    const m = check(remoteDef());
    expect(JSON.stringify(m.definition)).not.toContain(CANARY);
    expect(JSON.stringify(m), 'a log line of the whole model').not.toContain(CANARY);
    expect(inspect(m, { depth: 10 }), 'console.log of the whole model').not.toContain(CANARY);
    expect((m.definition.profiles[0] as { remote: { api_key: string } }).remote.api_key).toBe('set');
  });

  it('reads a kept definition (`set`) as a key sealed in the store', () => {
    const kept = check(remoteDef());
    expect(check(kept.definition).remote?.key.kind).toBe('stored');
  });

  it.each([
    [
      'a remote beside a local profile',
      remoteDef({ source: 'hf://a/b', profiles: [...remoteDef().profiles, { engine: 'sim' }] }),
      /spill\.to/,
    ],
    ['engine remote without a remote block', { name: 'x', profiles: [{ engine: 'remote' }] }, /needs a remote block/],
    [
      'a remote block on a local engine',
      { name: 'x', source: 'hf://a/b', profiles: [{ engine: 'sim', remote: { url: 'http://h' } }] },
      /only an engine: remote/,
    ],
    ['a local model without a source', { name: 'x', profiles: [{ engine: 'sim' }] }, /source: is required/],
    [
      'both api_key and api_key_file',
      remoteDef({ profiles: [{ engine: 'remote', remote: { url: 'http://h', api_key: 'a', api_key_file: '/k' } }] }),
      /not both/,
    ],
    [
      'an api llmgw does not speak',
      remoteDef({ profiles: [{ engine: 'remote', remote: { url: 'http://h', api: 'grpc' } }] }),
      /want one of chat, llmgw, responses, anthropic/,
    ],
    [
      'spill to a model not in the catalog',
      { name: 'x', source: 'hf://a/b', profiles: [{ engine: 'sim' }], spill: { to: 'nowhere' } },
      /names no model/,
    ],
  ])('refuses %s', (_why, def, message) => {
    let err: unknown;
    try {
      check(def);
    } catch (e) {
      err = e;
    }
    expect(String((err as Error)?.message)).toMatch(message);
    expect(String((err as Error)?.message), 'a refusal never echoes the key').not.toContain(CANARY);
  });

  it('compiles a spill block with its defaults', () => {
    const remote = check(remoteDef());
    const m = check({ name: 'local', source: 'hf://a/b', profiles: [{ engine: 'sim' }], spill: { to: 'big-remote' } }, [
      remote,
    ]);
    expect(m.spill).toEqual({ to: 'big-remote', when: 'saturated', maxQueueMs: 1000 });
  });
});
