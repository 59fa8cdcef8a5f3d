import { describe, expect, it } from 'vitest';
import { ENGINE_ENDPOINTS, endpointNeeds, endpointsOfEngines, modelServes, SERVED_ENDPOINTS } from './endpoints.js';
import { compileModel, ModelSchema } from './model.js';

const model = (over: Record<string, unknown>) =>
  compileModel(ModelSchema.parse({ name: 'm', source: 'hf://a/b', profiles: [{ engine: 'vllm' }], ...over }), 'store');

describe('what a model serves', () => {
  it('reads what it serves from its engines when it does not say', () => {
    expect(model({ profiles: [{ engine: 'builtin' }] }).endpoints).toEqual([
      'chat',
      'completions',
      'embeddings',
      'tokenize',
    ]);
    expect(
      model({ profiles: [{ engine: 'llamacpp' }] }).endpoints,
      'llama.cpp reranks (--reranking) but has no score or audio',
    ).toEqual(['chat', 'completions', 'embeddings', 'rerank', 'tokenize']);
    expect(model({ profiles: [{ engine: 'vllm' }] }).endpoints).toEqual([...SERVED_ENDPOINTS]);
    expect(
      model({ profiles: [{ engine: 'builtin' }, { engine: 'llamacpp' }] }).endpoints,
      'any profile may serve the request: the union',
    ).toEqual(endpointsOfEngines(['llamacpp']));
  });

  it('keeps what it declares, in the one order views list them', () => {
    const m = model({ endpoints: ['transcriptions', 'chat'] });
    expect(m.endpoints).toEqual(['chat', 'transcriptions']);
    expect(m.definition.endpoints, 'the definition keeps what was written').toEqual(['transcriptions', 'chat']);
  });

  it('carries detokenize over tokenize and the chat-derived APIs over chat', () => {
    const rerankOnly = model({ endpoints: ['rerank'] });
    expect(modelServes(rerankOnly, 'rerank')).toBe(true);
    for (const e of ['chat', 'messages', 'responses', 'tokenize', 'detokenize'] as const)
      expect(modelServes(rerankOnly, e), e).toBe(false);
    const chat = model({ endpoints: ['chat', 'tokenize'] });
    for (const e of ['chat', 'messages', 'responses', 'tokenize', 'detokenize'] as const)
      expect(modelServes(chat, e), e).toBe(true);
    expect(endpointNeeds('detokenize')).toBe('tokenize');
  });

  it('has a row for every engine, each within the served endpoints', () => {
    for (const [engine, served] of Object.entries(ENGINE_ENDPOINTS)) {
      expect(served.length, engine).toBeGreaterThan(0);
      for (const s of served) expect(SERVED_ENDPOINTS, `${engine}: ${s}`).toContain(s);
    }
  });
});
