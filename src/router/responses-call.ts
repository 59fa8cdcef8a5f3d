// POST /v1/responses before its relay: the body parsed (src/router/responses
// does the Responses API's own rules), the conversation it continues loaded
// from the response store by the caller's key, then translated twice, once
// to chat (what the admission checks read and what most engines get) and
// once to a self-contained Responses request (for an engine that serves the
// API natively, which then keeps nothing). Apart from admission.ts because
// it is the one hook that waits on the store, and apart from the relays
// because it decides nothing per replica.
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import type { ApiKeyRecord } from '../control/keys/index.js';
import type { StoredResponse } from '../control/responses/types.js';
import { LlmgwError, isLlmgwError, type ErrorCode } from '../errors/index.js';
import type { Translate } from './admission.js';
import type { ResponsesRelayCall } from './relay-responses.js';
import {
  keptItems,
  newId,
  parseRequest,
  toChat,
  toNative,
  toResponse,
  ResponseStreamTranslator,
  type ResponseIdentity,
  type ResponsesCall,
  type ResponsesRequest,
} from './responses/index.js';

/** A Responses request between its two hooks: parsed, and the items of the conversation it continues (empty for a new one). */
export interface ResponsesTurn {
  readonly request: ResponsesRequest;
  readonly previousItems: readonly unknown[];
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set on POST /v1/responses by previousResponseHook; null before it and on every other route. */
    responsesTurn: ResponsesTurn | null;
  }
}

/** What the hook needs of the router: the store lookup (which waits for a write in flight) and its one way of refusing. */
export interface ResponsesLookup {
  keptResponse(key: ApiKeyRecord | null, id: string): Promise<StoredResponse | undefined>;
  /** Input items with the item_references this key's kept responses answer replaced by their items. */
  resolveReferences(key: ApiKeyRecord | null, items: readonly unknown[]): Promise<unknown[]>;
  refuse(reply: FastifyReply, status: number, code: ErrorCode, message: string, param?: string | null): FastifyReply;
}

type Hook = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void;

/**
 * After the key hook: the body parsed as a Responses request (400 naming
 * the field), and a previous_response_id loaded from this key's kept
 * responses, or refused as OpenAI refuses it (400,
 * previous_response_not_found): unknown, expired, deleted and another
 * key's all read the same.
 */
export function previousResponseHook(router: ResponsesLookup): Hook {
  /** A check's refusal as the client's error; anything else is a fault, for the listener's 500. */
  const refuseError = (reply: FastifyReply, err: unknown, done: HookHandlerDoneFunction): void => {
    if (!isLlmgwError(err)) return done(err as Error);
    router.refuse(reply, err.status, err.code, err.message, typeof err.context.param === 'string' ? err.context.param : null);
  };
  return (request, reply, done) => {
    const body = request.body;
    // Not bytes: the call hook refuses it (415), as on every inference route.
    if (!Buffer.isBuffer(body)) return done();
    let json: unknown;
    try {
      json = JSON.parse(body.toString('utf8'));
    } catch (err) {
      return refuseError(reply, new LlmgwError('LLMGW_INVALID_JSON', `the request body is not valid JSON: ${(err as Error).message}`), done);
    }
    const proceed = (resolved: unknown) => {
      let parsed: ResponsesRequest;
      try {
        parsed = parseRequest(resolved);
      } catch (err) {
        return refuseError(reply, err, done);
      }
      const previousId = parsed.previousResponseId;
      if (previousId === null) {
        request.responsesTurn = { request: parsed, previousItems: [] };
        return done();
      }
      router.keptResponse(request.apiKey, previousId).then(
        (kept) => {
          if (!kept) {
            router.refuse(
              reply,
              400,
              'LLMGW_PREVIOUS_RESPONSE_NOT_FOUND',
              `Previous response with id '${previousId}' not found. Responses are kept per API key, only with store: true (the default), until they expire or are deleted; send the whole conversation as input instead.`,
              'previous_response_id',
            );
            return;
          }
          request.responsesTurn = { request: parsed, previousItems: kept.items };
          done();
        },
        (err: unknown) => done(err as Error),
      );
    };
    // Earlier answers sent back by reference (the AI SDK does so for every assistant turn it knows the id of) are resolved first.
    const input = (json as { input?: unknown } | null)?.input;
    if (!Array.isArray(input) || !input.some((item) => (item as { type?: unknown } | null)?.type === 'item_reference')) return proceed(json);
    router.resolveReferences(request.apiKey, input).then(
      (resolved) => proceed({ ...(json as object), input: resolved }),
      (err: unknown) => done(err as Error),
    );
  };
}

/** The call hook's translation for POST /v1/responses: the chat body its checks read, and the call each attempt sends and answers by. */
export const fromResponses: Translate = (_raw, request) => {
  const turn = request.responsesTurn;
  if (turn === null) throw new LlmgwError('LLMGW_INTERNAL', 'a Responses request reached its translation without being parsed');
  const { chat, call } = toChat(turn.request, turn.previousItems);
  const native = toNative(turn.request, turn.previousItems);
  // One id per request, whichever attempt answers: the translated answer carries it (an engine's native answer has its own).
  const identity: ResponseIdentity = { id: newId('resp'), createdAtS: Math.floor(Date.now() / 1000) };
  return { raw: Buffer.from(JSON.stringify(chat), 'utf8'), responses: relayCall(call, Buffer.from(JSON.stringify(native.body), 'utf8'), identity) };
};

function relayCall(call: ResponsesCall, native: Buffer, identity: ResponseIdentity): ResponsesRelayCall {
  return {
    stream: call.stream,
    store: call.store,
    previousResponseId: call.previousResponseId,
    native,
    toResponse: (chat) => toResponse(chat as Parameters<typeof toResponse>[0], call, identity),
    newStream: () => {
      const t = new ResponseStreamTranslator(call, identity);
      return {
        push: (chunk) => t.push(chunk as Parameters<ResponseStreamTranslator['push']>[0]),
        end: () => t.end(),
        fail: (message) => t.fail(message),
        response: () => t.response ?? null,
      };
    },
    itemsAfter: (response) => keptItems(call, response),
  };
}
