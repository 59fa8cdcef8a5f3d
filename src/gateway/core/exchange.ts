// One client request through its life in the gateway, from the handler that
// hijacks the reply to the last byte of its answer: what the attempt loop,
// the attempt chain, the relays and the ledger read and set of it. Its own
// file so that each of those parts names the one type instead of the router.
import type { ServerResponse } from 'node:http';
import type { Dialect, DialectTurn, TurnExchange } from './dialect.js';
import type { Tab } from './ledger.js';
import type { ApiKeyRecord, RoutedModel, RouterReplica } from '../ports/index.js';
import type { RequestAttempt, RequestRecord } from './request-log.js';
import type { Endpoint, ParsedRequest } from './validate.js';
import type { ShadowPlan } from '../traffic/index.js';

export interface Exchange extends TurnExchange {
  /** The listener's request id (sent back as x-request-id), sent upstream and in every log line about it. */
  readonly id: string;
  readonly endpoint: Endpoint;
  /** The engine's path for this endpoint (a replica serving the dialect natively gets its turn's instead). */
  readonly path: string;
  /** The body's Content-Type as the engine gets it (a form keeps its boundary). */
  readonly contentType: string;
  readonly res: ServerResponse;
  readonly key: ApiKeyRecord | null;
  readonly parsed: ParsedRequest;
  readonly raw: Buffer;
  readonly requested: RoutedModel;
  /** performance.now() at arrival. */
  readonly startedAt: number;
  clientGone: boolean;
  timedOut: boolean;
  /** The key was revoked while this ran: stopped as a timeout is, answered 401 before any byte, or its stream ends with an error event. */
  revoked: boolean;
  /** Aborts the upstream attempt in progress; null between attempts. */
  abort: (() => void) | null;
  /** Wakes a cold hold or a backoff wait early. */
  wake: (() => void) | null;
  dispatched: boolean;
  /** The engine refused the stream_options the router added: sent as the client wrote it from then on. */
  usageRefused: boolean;
  /** Its account (ledger.ts): the reservation made at admission, settled once when it ends. */
  readonly tab: Tab;
  /** max_tokens added to a chat or completions body that set none, so the engine generates no more than was reserved; null = none added. */
  readonly completionCap: number | null;
  /** The API the client speaks: the shape of its refusals. */
  readonly dialect: Dialect;
  /** What its dialect's translation made for its attempts: where each goes, and the relay of its answer. */
  readonly turn: DialectTurn;
  /** What the request log will hold of it, filled in as it goes. */
  readonly trace: RequestRecord;
  /** Its copy for the named model's shadow (src/gateway/traffic), sent after its first attempt; null = not copied. */
  readonly shadow: ShadowPlan | null;
  /** Its OpenTelemetry spans (src/gateway/tracing); null = tracing is off, and nothing is traced. */
  readonly tracing: RequestTracing | null;
}

/** What the request path tells a request's spans as it goes (src/gateway/tracing's RequestSpan is the one). */
export interface RequestTracing {
  /** The trace id when the trace is sampled; undefined = not recorded. */
  readonly traceId: string | undefined;
  holdStarted(model: RoutedModel): void;
  /** `ready`: a replica is ready now. */
  holdEnded(ready: boolean, heldMs: number): void;
  attemptStarted(model: RoutedModel, replica: RouterReplica): void;
  /** Writes the attempt's traceparent into the upstream request's headers. */
  inject(headers: Record<string, string>): void;
  firstByte(ttftMs: number): void;
  /** The answer ended; `tail` reads its end as the relay kept it, `events` counts the SSE events relayed. */
  answered(tail: () => string, events: number): void;
  /** `record` = the request log's entry for it; undefined = none. */
  attemptEnded(record: RequestAttempt | undefined): void;
  /** The router is done with the request. */
  ended(record: RequestRecord): void;
}

/** Where each endpoint goes on the engine (rerank goes to the path the client called: vLLM serves three). */
export const UPSTREAM_PATHS: Record<Endpoint, string> = {
  chat: '/v1/chat/completions',
  completions: '/v1/completions',
  embeddings: '/v1/embeddings',
  rerank: '/v1/rerank',
  score: '/v1/score',
  transcriptions: '/v1/audio/transcriptions',
  tokenize: '/tokenize',
  detokenize: '/detokenize',
  messages: '/v1/chat/completions',
  // Translated to chat at admission; a replica serving the Responses API itself gets its turn's path instead.
  responses: '/v1/chat/completions',
};

/** What a request of a key revoked while it ran is told: the same words as a revoked key's refusal at admission. */
export function revokedMessage(key: ApiKeyRecord): string {
  return `the API key ${key.prefix}… was revoked; ask the operator for a new one`;
}
