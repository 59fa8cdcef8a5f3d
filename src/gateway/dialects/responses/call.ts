// POST /v1/responses before its relay: the body parsed (src/gateway/responses
// does the Responses API's own rules), the conversation it continues loaded
// from the response store by the caller's key, then translated twice, once
// to chat (what the admission checks read and what most engines get) and
// once to a self-contained Responses request (for an engine that serves the
// API natively, which then keeps nothing). Apart from admission.ts because
// it is the one hook that waits on the store; the turn it makes chooses,
// per replica, the native or the translated relay.
import type { ApiKeyRecord, StoredResponse } from '../../ports/index.js';
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { LlmgwError, isLlmgwError, type ErrorCode } from '../../../errors/index.js';
import type { Translate } from '../../core/admission.js';
import { NativeResponsesRelay, ResponsesRelayHandler, type ResponsesRelayCall } from './relay.js';
import { withholdsUsage } from '../../core/dispatch.js';
import type { DialectTurn } from '../../core/dialect.js';
import type { ResponseKeeper } from './keeper.js';
import { takesResponsesNatively } from './native.js';
import {
  itemReferences,
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
} from './translations.js';

/** A Responses request between its two hooks: parsed, and the items of the conversation it continues (empty for a new one). */
export interface ResponsesTurn {
  readonly request: ResponsesRequest;
  readonly previousItems: readonly unknown[];
  /** The kept items this request's item_reference inputs name, by id (empty: none named, or none found). */
  readonly referenced: ReadonlyMap<string, unknown>;
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
  /** The output items of this key's kept responses that the ids name (absent: not found). */
  keptItems(key: ApiKeyRecord | null, itemIds: readonly string[]): Promise<ReadonlyMap<string, unknown>>;
  refuse(reply: FastifyReply, status: number, code: ErrorCode, message: string, param?: string | null): FastifyReply;
}

type Hook = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void;

/**
 * After the key hook: the body parsed as a Responses request (400 naming
 * the field), a previous_response_id loaded from this key's kept
 * responses, or refused as OpenAI refuses it (400,
 * previous_response_not_found): unknown, expired, deleted and another
 * key's all read the same; and the items its item_references name looked
 * up among the key's kept output items (one not found is refused by the
 * translation, saying to send the item itself).
 */
export function previousResponseHook(router: ResponsesLookup): Hook {
  return (request, reply, done) => {
    const body = request.body;
    // Not bytes: the call hook refuses it (415), as on every inference route.
    if (!Buffer.isBuffer(body)) return done();
    let parsed: ResponsesRequest;
    try {
      let json: unknown;
      try {
        json = JSON.parse(body.toString('utf8'));
      } catch (err) {
        throw new LlmgwError('LLMGW_INVALID_JSON', `the request body is not valid JSON: ${(err as Error).message}`);
      }
      parsed = parseRequest(json);
    } catch (err) {
      if (!isLlmgwError(err)) return done(err as Error);
      router.refuse(
        reply,
        err.status,
        err.code,
        err.message,
        typeof err.context.param === 'string' ? err.context.param : null,
      );
      return;
    }
    const previousId = parsed.previousResponseId;
    const references = itemReferences(parsed);
    if (previousId === null && references.length === 0) {
      request.responsesTurn = { request: parsed, previousItems: [], referenced: new Map() };
      return done();
    }
    // Earlier answers sent back by id (the AI SDK does so for every one it knows the id of) are looked up among the key's kept items.
    const referenced =
      references.length === 0
        ? Promise.resolve(new Map<string, unknown>())
        : router.keptItems(request.apiKey, references);
    const previous = previousId === null ? Promise.resolve(null) : router.keptResponse(request.apiKey, previousId);
    Promise.all([previous, referenced]).then(
      ([kept, found]) => {
        if (previousId !== null && !kept) {
          router.refuse(
            reply,
            400,
            'LLMGW_PREVIOUS_RESPONSE_NOT_FOUND',
            `Previous response with id '${previousId}' not found. Responses are kept per API key, only with store: true (the default), until they expire or are deleted; send the whole conversation as input instead.`,
            'previous_response_id',
          );
          return;
        }
        request.responsesTurn = { request: parsed, previousItems: kept?.items ?? [], referenced: found };
        done();
      },
      (err: unknown) => done(err as Error),
    );
  };
}

/**
 * The call hook's translation for POST /v1/responses: the chat body its
 * checks read, and the turn each attempt sends and answers by: natively to
 * an engine that serves the API (native.ts), as chat to any other; the
 * finished Response handed to `keeper`.
 */
export function fromResponses(keeper: ResponseKeeper): Translate {
  return (_raw, request) => {
    const turn = request.responsesTurn;
    if (turn === null)
      throw new LlmgwError('LLMGW_INTERNAL', 'a Responses request reached its translation without being parsed');
    const { chat, call } = toChat(turn.request, turn.previousItems, turn.referenced);
    const native = toNative(turn.request, turn.previousItems, turn.referenced);
    // One id per request, whichever attempt answers: the translated answer carries it, and a native answer has the engine's replaced by it.
    const identity = { id: newId('resp'), createdAtS: Math.floor(Date.now() / 1000) };
    const relay = relayCall(call, Buffer.from(JSON.stringify(native.body), 'utf8'), identity);
    return { raw: Buffer.from(JSON.stringify(chat), 'utf8'), turn: responsesTurn(relay, keeper) };
  };
}

/** Where an engine serving the Responses API natively takes it. */
const RESPONSES_PATH = '/v1/responses';

function responsesTurn(call: ResponsesRelayCall, keeper: ResponseKeeper): DialectTurn {
  const native = { path: RESPONSES_PATH, body: call.native };
  return {
    native: (replica) => (takesResponsesNatively(replica) ? native : null),
    relay: (a, hooks, resolve) => {
      const keep = (response: Record<string, unknown>) => keeper.keep(a.ex, call, a.model, response);
      if (a.passThrough) return new NativeResponsesRelay(a.ex, hooks, resolve, keep, call.id);
      return new ResponsesRelayHandler(a.ex, hooks, resolve, call, keep, withholdsUsage(a.ex));
    },
  };
}

function relayCall(
  call: ResponsesCall,
  native: Buffer,
  identity: ResponseIdentity & { readonly id: string },
): ResponsesRelayCall {
  return {
    id: identity.id,
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
