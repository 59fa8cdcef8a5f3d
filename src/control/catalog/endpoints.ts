// What a model serves: the engine endpoints a request may reach (chat,
// rerank, audio transcriptions, …), written on the model as `endpoints` or,
// absent, read from the engines of its profiles. Separate from model.ts
// because the router asks it on every request (`modelServes`) and the APIs
// the router translates (Anthropic's Messages, OpenAI's Responses) plug in
// here by naming the engine endpoint they are carried over.
import type { EngineName } from './model.js';

/** The engine endpoints a model may declare, in the order views list them. */
export const SERVED_ENDPOINTS = [
  'chat',
  'completions',
  'embeddings',
  'rerank',
  'score',
  'transcriptions',
  'tokenize',
] as const;
export type ServedEndpoint = (typeof SERVED_ENDPOINTS)[number];

/**
 * Every API a client may call on the client listener, for routing and usage
 * records: the served endpoints, plus those carried over another one
 * (`ENDPOINT_NEEDS`): `detokenize` beside `tokenize`, and the chat-derived
 * APIs the router translates to Chat Completions.
 */
export type Endpoint = ServedEndpoint | 'detokenize' | 'messages' | 'responses';

/** Every Endpoint, for checking a name read at run time (a usage filter). */
export const API_ENDPOINTS: readonly Endpoint[] = [...SERVED_ENDPOINTS, 'detokenize', 'messages', 'responses'];

/** The served endpoint each API needs of the model's engine. */
const ENDPOINT_NEEDS: Readonly<Record<Endpoint, ServedEndpoint>> = {
  chat: 'chat',
  completions: 'completions',
  embeddings: 'embeddings',
  rerank: 'rerank',
  score: 'score',
  transcriptions: 'transcriptions',
  tokenize: 'tokenize',
  detokenize: 'tokenize',
  messages: 'chat',
  responses: 'chat',
};

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

/** The served endpoint an API is carried over. */
export function endpointNeeds(endpoint: Endpoint): ServedEndpoint {
  return ENDPOINT_NEEDS[endpoint];
}

/** What a model serves when it does not say: whatever any of its profiles' engines serves, in SERVED_ENDPOINTS order. */
export function endpointsOfEngines(engines: readonly EngineName[]): readonly ServedEndpoint[] {
  const any = new Set<ServedEndpoint>();
  for (const e of engines) for (const s of ENGINE_ENDPOINTS[e]) any.add(s);
  return SERVED_ENDPOINTS.filter((s) => any.has(s));
}

/** Whether a model serves an API: the endpoint that API needs is among the model's. */
export function modelServes(model: { readonly endpoints: readonly ServedEndpoint[] }, endpoint: Endpoint): boolean {
  return model.endpoints.includes(ENDPOINT_NEEDS[endpoint]);
}
