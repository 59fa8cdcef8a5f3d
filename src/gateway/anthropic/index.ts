// Anthropic's Messages API over the router's Chat Completions path: pure
// translations of the request, the answer, the stream and the errors, kept
// apart from the router so each is tested as data in, data out; the wiring
// (x-api-key, the error shape, the route) is in ../router.ts and the
// translating relay in ../relay-anthropic.ts.
export { toChatRequest, type AnthropicCall, type TranslatedRequest } from './request.js';
export { toMessage, stopReasonOf, toolInput, usageOf, type AnthropicMessage, type StopReason } from './response.js';
export { MessageStreamTranslator, sseEvent } from './stream.js';
export { anthropicErrorBody, anthropicErrorType, toAnthropicError } from './errors.js';
