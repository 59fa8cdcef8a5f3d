// The APIs the gateway routes and the engine endpoint each is carried
// over: the vocabulary a model's `endpoints` is written in, so the catalog
// (which lets a model declare them, or reads them from its engines) and the
// gateway (which asks, per request, whether the model serves the API) share
// one list. The gateway owns it because it is the part that routes them.

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

/** The served endpoint an API is carried over. */
export function endpointNeeds(endpoint: Endpoint): ServedEndpoint {
  return ENDPOINT_NEEDS[endpoint];
}

/** Whether a model serves an API: the endpoint that API needs is among the model's. */
export function modelServes(model: { readonly endpoints: readonly ServedEndpoint[] }, endpoint: Endpoint): boolean {
  return model.endpoints.includes(ENDPOINT_NEEDS[endpoint]);
}
