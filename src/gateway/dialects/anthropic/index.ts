// Anthropic's Messages API as a dialect of the gateway: POST /v1/messages
// translated to Chat Completions at admission and its answer translated back
// by its relay (relay.ts), POST /v1/messages/count_tokens asked of a
// replica's tokenizer (count-tokens.ts), every refusal on its routes in
// Anthropic's error shape, its key taken from x-api-key as well as a bearer
// token, and `request-id` on every answer. The translations themselves
// (request, response, stream, errors) are pure, tested as data in, data out.
import type { FastifyRequest } from 'fastify';
import { LlmgwError } from '../../../errors/index.js';
import { callHook, type Translate } from '../../core/admission.js';
import { rateLimitHook } from '../../core/limits-hook.js';
import { withholdsUsage } from '../../core/dispatch.js';
import { routeConfig, type Dialect, type DialectHost, type DialectTurn } from '../../core/dialect.js';
import { countTokens, COUNTS_PROMPTS, promptCount } from './count-tokens.js';
import { anthropicErrorBody, anthropicErrorType } from './errors.js';
import { AnthropicRelayHandler } from './relay.js';
import { MESSAGES_PARAMS, toChatRequest, type AnthropicCall } from './request.js';

export { toChatRequest, MESSAGES_PARAMS, type AnthropicCall, type TranslatedRequest } from './request.js';
export { toMessage, stopReasonOf, toolInput, usageOf, type AnthropicMessage, type StopReason } from './response.js';
export { MessageStreamTranslator, sseEvent } from './stream.js';
export { anthropicErrorBody, anthropicErrorType, toAnthropicError } from './errors.js';

/**
 * The turn of one Messages request: sent as chat to every engine, its answer translated back.
 *
 * A stream's message_start must carry the prompt's count, which a chat
 * stream gives only in its last chunk (include_usage; vLLM alone can put
 * usage on every chunk, and the builtin and sim engines and llama.cpp
 * cannot). So each streamed attempt asks the same replica's tokenizer
 * (/tokenize with the messages and tools, the chat template applied: the
 * count the engine's usage reports) at the moment the attempt is sent:
 * the two run side by side, and the count is back before the engine's
 * first token unless tokenizing takes longer than prefill, which it does
 * not. message_start waits for the count only in that case. Counting
 * before sending instead would add a round trip to every stream's first
 * token; holding message_start for the engine's usage would hold the
 * whole stream to its end. Where no count comes (an engine not named,
 * an error), message_start says 0 and message_delta the count.
 */
function messagesTurn(gw: DialectHost, call: AnthropicCall, requestId: string): DialectTurn {
  return {
    native: () => null,
    relay: (a, hooks, resolve) => {
      const counted = call.stream && COUNTS_PROMPTS.has(a.replica.engine ?? '');
      const count = counted ? promptCount(gw, a.replica, a.model, a.ex.parsed, `${requestId}-count`) : null;
      return new AnthropicRelayHandler(a.ex, hooks, resolve, call, requestId, withholdsUsage(a.ex), count);
    },
  };
}

/** Anthropic's body as a chat body, or a 400 naming the field; `forCount` (count_tokens) needs no max_tokens. */
function asChat(gw: DialectHost, forCount: boolean): Translate {
  return (raw: Buffer, request: FastifyRequest) => {
    let json: unknown;
    try {
      json = JSON.parse(raw.toString('utf8'));
    } catch (err) {
      throw new LlmgwError('LLMGW_INVALID_JSON', `the request body is not valid JSON: ${(err as Error).message}`);
    }
    const { chat, call } = toChatRequest(json, forCount);
    return { raw: Buffer.from(JSON.stringify(chat), 'utf8'), turn: messagesTurn(gw, call, request.id) };
  };
}

export const anthropic: Dialect = {
  name: 'anthropic',
  errorBody: (status, _code, message) => anthropicErrorBody(message, status),
  params: MESSAGES_PARAMS,
  errorShape: (e) => ({ type: 'error', error: { type: anthropicErrorType(e.status), message: e.message } }),
  onRequest(request, reply) {
    // Anthropic's SDKs read the request id from `request-id` (message._request_id); x-request-id is sent too.
    reply.raw.setHeader('request-id', request.id);
    const apiKey = request.headers['x-api-key'];
    if (request.headers.authorization === undefined && typeof apiKey === 'string')
      request.headers.authorization = `Bearer ${apiKey}`;
  },
  routes(scope, gw) {
    const admission = gw.admission();
    const bodyLimit = gw.options.bodyLimitBytes;
    const config = routeConfig(anthropic);
    scope.post(
      '/v1/messages',
      { bodyLimit, config, preHandler: [callHook(admission, 'messages', asChat(gw, false)), rateLimitHook(admission)] },
      (request, reply) => gw.infer(request, reply),
    );
    // count_tokens generates nothing and costs no tokens: it takes a request, and reserves none.
    const countRateLimit = rateLimitHook(admission, { countOnly: true });
    scope.post(
      '/v1/messages/count_tokens',
      { bodyLimit, config, preHandler: [callHook(admission, 'messages', asChat(gw, true)), countRateLimit] },
      (request, reply) => countTokens(gw, request, reply),
    );
  },
};
