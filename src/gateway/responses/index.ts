// OpenAI's Responses API over the router's Chat Completions path: pure
// translations of the request, the answer and the stream, kept apart from
// the router so each is tested as data in, data out; the wiring (the route,
// the response store, the native pass-through) is the router's. Errors need
// nothing of their own: the Responses API answers in OpenAI's error shape,
// the router's own (../errors.ts).
export {
  parseRequest,
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
