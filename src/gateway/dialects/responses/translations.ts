// OpenAI's Responses API over the gateway's Chat Completions path: pure
// translations of the request, the answer and the stream, kept apart from
// the dialect's wiring (./index.ts, ./call.ts, ./keeper.ts) and its relays
// (./relay.ts) so each is tested as data in, data out. Errors need nothing
// of their own: the Responses API answers in OpenAI's error shape.
export {
  parseRequest,
  RESPONSES_PARAMS,
  itemReferences,
  toChat,
  toNative,
  type ResponsesRequest,
  type ResponsesCall,
  type TranslatedResponsesRequest,
} from './request.js';
export {
  toResponse,
  keptItems,
  newId,
  usageOf,
  type ResponseObject,
  type ResponseIdentity,
  type ResponseStatus,
  type ResponsesUsage,
} from './response.js';
export { ResponseStreamTranslator } from './stream.js';
