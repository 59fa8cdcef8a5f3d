// The fallback chain, as data in and data out: which models may serve a
// request, in what order, and which fallbacks a key may not use (named in
// x-llmgw-fallback-skipped). Guards against a fallback serving a key what
// its allowed models forbid, and against one that cannot serve the endpoint
// answering an engine's 404 in place of the model's own refusal.
import { describe, expect, it } from 'vitest';
import { fallbackChain } from './attempt-loop.js';
import type { ApiKeyRecord, RoutedModel } from '../ports/index.js';
import type { ServedEndpoint } from '../ports/endpoints.js';

function model(name: string, fallbacks: string[] = [], endpoints: ServedEndpoint[] = ['chat'], aliases: string[] = []) {
  return {
    name,
    aliases,
    fallbacks,
    routing: 'least-load',
    fallbackWhileCold: false,
    endpoints,
    limits: { contextTokens: null, maxTokens: null, maxN: null },
  } as unknown as RoutedModel;
}

function catalogOf(models: RoutedModel[]) {
  const byName = new Map<string, RoutedModel>();
  for (const m of models) for (const n of [m.name, ...m.aliases]) byName.set(n, m);
  return { resolve: (n: string) => byName.get(n) };
}

function key(allowedModels: string[] | null): ApiKeyRecord {
  return {
    id: 'k',
    name: 'k',
    prefix: 'llmgw_k',
    hash: 'h',
    allowedModels,
    requestsPerMinute: null,
    tokensPerMinute: null,
    expiresAtMs: null,
    createdAtMs: 0,
    createdBy: 'test',
    revokedAtMs: null,
  };
}

const names = (chain: readonly RoutedModel[]) => chain.map((m) => m.name);

describe('fallbackChain', () => {
  it('lists the model, then its fallbacks in order, each once, by name or alias', () => {
    const a = model('a', ['b', 'c-alias', 'b', 'a', 'missing']);
    const b = model('b');
    const c = model('c', [], ['chat'], ['c-alias']);
    const { chain, skipped } = fallbackChain(a, 'chat', null, catalogOf([a, b, c]));
    expect(names(chain), 'itself first, unknown and repeated names left out').toEqual(['a', 'b', 'c']);
    expect(skipped).toEqual([]);
  });

  it('leaves out a fallback that does not serve the endpoint', () => {
    const a = model('a', ['embedder', 'b'], ['chat', 'embeddings']);
    const embedder = model('embedder', [], ['embeddings']);
    const b = model('b');
    expect(names(fallbackChain(a, 'messages', null, catalogOf([a, embedder, b])).chain)).toEqual(['a', 'b']);
    expect(names(fallbackChain(a, 'embeddings', null, catalogOf([a, embedder, b])).chain)).toEqual(['a', 'embedder']);
  });

  it('skips, and names once, a fallback the key may not use; a key allowed it by an alias keeps it', () => {
    const a = model('a', ['b', 'c', 'b']);
    const b = model('b');
    const c = model('c', [], ['chat'], ['c-alias']);
    const catalog = catalogOf([a, b, c]);
    const limited = fallbackChain(a, 'chat', key(['a', 'c-alias']), catalog);
    expect(names(limited.chain)).toEqual(['a', 'c']);
    expect(limited.skipped, 'named for the x-llmgw-fallback-skipped header').toEqual(['b']);
    const open = fallbackChain(a, 'chat', key(null), catalog);
    expect(names(open.chain), 'a key with no model list may use every fallback').toEqual(['a', 'b', 'c']);
  });
});
