// What a model serves: the engine endpoints a request may reach (chat,
// rerank, audio transcriptions, …), written on the model as `endpoints` or,
// absent, read from the engines of its profiles. The vocabulary itself
// (the endpoints, the APIs carried over them, `modelServes`) is the
// gateway's, which routes them (src/gateway/ports/endpoints.ts); this file adds
// what the catalog knows: which engine serves which.
import type { EngineName } from './model.js';
import { SERVED_ENDPOINTS, type ServedEndpoint } from '../../gateway/ports/endpoints.js';

export {
  API_ENDPOINTS,
  endpointNeeds,
  modelServes,
  SERVED_ENDPOINTS,
  type Endpoint,
  type ServedEndpoint,
} from '../../gateway/ports/endpoints.js';

/**
 * What each engine can serve, for a model that does not say (the model's
 * weights still decide: a vLLM replica of a chat model has no rerank). From
 * the engines' own route tables: vLLM's OpenAI server (api_server.py:
 * /v1/rerank, /v1/score, /v1/audio/transcriptions, /tokenize, /detokenize,
 * depending on the model's task); llama.cpp's server (chat, completions,
 * embeddings, /v1/rerank with --reranking, /tokenize and /detokenize);
 * SGLang's http_server.py (/v1/rerank, /v1/score, /tokenize, /detokenize
 * beside the OpenAI routes; no audio); llmgw's builtin engine
 * (src/engine/builtin/server.ts); the sim engine serves everything, so
 * every path of the router can be tested without a GPU.
 */
export const ENGINE_ENDPOINTS: Readonly<Record<EngineName, readonly ServedEndpoint[]>> = {
  vllm: SERVED_ENDPOINTS,
  llamacpp: ['chat', 'completions', 'embeddings', 'rerank', 'tokenize'],
  sglang: ['chat', 'completions', 'embeddings', 'rerank', 'score', 'tokenize'],
  builtin: ['chat', 'completions', 'embeddings', 'tokenize'],
  sim: SERVED_ENDPOINTS,
};

/** What a model serves when it does not say: whatever any of its profiles' engines serves, in SERVED_ENDPOINTS order. */
export function endpointsOfEngines(engines: readonly EngineName[]): readonly ServedEndpoint[] {
  const any = new Set<ServedEndpoint>();
  for (const e of engines) for (const s of ENGINE_ENDPOINTS[e]) any.add(s);
  return SERVED_ENDPOINTS.filter((s) => any.has(s));
}
