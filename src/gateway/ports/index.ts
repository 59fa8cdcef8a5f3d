// The gateway's ports: everything it needs from outside, as interfaces it
// owns. The control plane (or a gateway process reading the store)
// implements them and imports the gateway; the gateway imports nothing of
// the control plane, so it can be read, tested and run without it
// (`llmgw gateway`). Each port is on the request path: implementations
// answer from memory, synchronously where they can.
import { hash } from 'node:crypto';
import type { ServedEndpoint } from './endpoints.js';
import type { KvEventsEndpoint } from '../../protocol/kv-events.js';
import type { RemoteReplicaTraits, SpillPolicy } from './remote.js';
export type { ForeignApiName, RemoteReplicaTraits, SpillPolicy, SpillWhen } from './remote.js';
import type { TrafficRules } from './traffic.js';

export type { ShadowRule, SplitBy, SplitTarget, TrafficRules } from './traffic.js';
export { SPLIT_BY } from './traffic.js';

// ---- the models it routes ------------------------------------------------

/** A model as the gateway routes it: the catalog's Model has this shape and more (its split and shadow: traffic.ts). */
export interface RoutedModel extends TrafficRules {
  /** The canonical name; replicas, usage and metrics are by this name. */
  readonly name: string;
  /** Other names a client may ask for it by. */
  readonly aliases: readonly string[];
  /** Models tried, in order, when this one's replicas all fail before the first byte; empty = none. */
  readonly fallbacks: readonly string[];
  /**
   * How a replica is chosen among the ready ones. prefix-cache: by what each
   * engine's KV events say it holds (src/gateway/prefix-cache), and as
   * least-load for replicas whose engines publish nothing.
   */
  readonly routing: 'least-load' | 'prefix' | 'least-inflight' | 'prefix-cache';
  /** With no replica ready, serve a ready fallback at once rather than hold for this model. */
  readonly fallbackWhileCold: boolean;
  /** The engine endpoints requests may reach (see endpoints.ts). */
  readonly endpoints: readonly ServedEndpoint[];
  /** Null = not declared: only the gateway's own caps apply. */
  readonly limits: {
    readonly contextTokens: number | null;
    readonly maxTokens: number | null;
    readonly maxN: number | null;
  };
  /** Where its requests go when its own replicas cannot take them in time (remote.ts); absent = local replicas only. */
  readonly spill?: SpillPolicy;
  /** How many requests its replicas take at once before the gateway queues them by fair share; absent = never queued. */
  readonly capacity?: ModelCapacity;
}

/** Priority classes, in the order a saturated model serves them (fair-share/priority.ts): interactive first. */
export const PRIORITY_CLASSES = ['interactive', 'batch'] as const;
export type PriorityClass = (typeof PRIORITY_CLASSES)[number];

/** A model's declared capacity (the catalog's `capacity`). */
export interface ModelCapacity {
  /** Requests one replica serves at once before the gateway queues; 0 = not declared (never queued). */
  readonly perReplica: number;
  /** How long a request may wait for a place before a 503. */
  readonly queueTimeoutMs: number;
  /** Requests one team may have waiting for this model; past it the next is refused at once with a 429. */
  readonly queuePerTenant: number;
}

/** A replica as the router sees it: where to send requests, and whether it still takes new ones. */
export interface RouterReplica {
  readonly id: string;
  /** The engine's base URL, e.g. http://10.0.0.5:8000 (the router appends /v1/...). */
  readonly endpoint: string;
  /** A draining replica finishes what it has and takes nothing new. */
  readonly draining: boolean;
  /**
   * Model names the engine answers to; absent = the model's name and aliases
   * (how agents start engines). A requested name not in it is rewritten to
   * the model's canonical name.
   */
  readonly servedNames?: readonly string[];
  /**
   * The replica's engine secret, sent upstream as `Authorization: Bearer`
   * in place of anything the client sent (a client's key never reaches an
   * engine); absent = the engine asks none.
   */
  readonly engineSecret?: string;
  /**
   * The engine the replica runs (vllm, llamacpp, sglang, builtin, sim), for
   * what it serves natively; absent = unknown, treated as serving only the
   * OpenAI endpoints every engine has.
   */
  readonly engine?: string;
  /**
   * The engine's load at its agent's last read of its metrics, dated on the
   * control plane's clock; its age is now less sampledAtMs. Absent = never
   * reported (or cleared): the router counts its own in-flight requests.
   */
  readonly load?: ReplicaLoad;
  /** The nodes its shards run on, for the request log; absent = not known. */
  readonly nodes?: readonly string[];
  /** Set for a remote endpoint or a peer llmgw (remote.ts); absent = one of this fleet's engines. */
  readonly remote?: RemoteReplicaTraits;
  /**
   * Where its engine tells what its KV cache holds (prefix-cache/sources);
   * absent = it tells nothing, and routing for it is as before.
   */
  readonly kvEvents?: KvEventsEndpoint;
}

/** What the router needs from the reconciler. Every method is called on the hot path: keep them cheap. */
export interface ReplicaDirectory {
  /** Replicas of the model (canonical name) that answer requests now; draining ones may be included. */
  ready(model: string): readonly RouterReplica[];
  /**
   * Why none is ready, to finish "model x has 0 ready replicas: …", e.g.
   * "1 fetching weights, 43%" or "no replica is wanted (scaling min 0) and none can be placed".
   */
  describe(model: string): string;
  /**
   * A request waits for this model, which has no ready replica. Returns true
   * when a replica is starting or will be started for it (worth holding the
   * request), false when none will come (no fit, max 0).
   */
  demand(model: string): boolean;
  /** Optional change notification (a replica became ready); the router then wakes held requests early. Returns an unsubscribe. */
  subscribe?(listener: () => void): () => void;
}

export interface RoutedModels {
  resolve(nameOrAlias: string): RoutedModel | undefined;
  models(): readonly RoutedModel[];
}

// ---- what it reports back ------------------------------------------------

/** One replica's use, as one router (or the sum over every instance) saw it. */
export interface ReplicaUse {
  /** Requests in flight to the replica now. */
  inFlight: number;
  /** Epoch ms of the last request start or end; null = never used (not the same as idle since some time). */
  lastUsedAtMs: number | null;
}

/**
 * A replica's engine load as its agent last read it from the engine's
 * metrics, for the router's choice and the scaler. The control plane's
 * clock: `sampledAtMs` is when the control plane received the heartbeat
 * less the age the agent gave, so a reader knows how old it is.
 */
export interface ReplicaLoad {
  /** Requests the engine is generating for. */
  readonly running: number;
  /** Requests queued inside the engine for a free sequence. */
  readonly waiting: number;
  /** KV-cache use, 0..1; absent = the engine does not report it. */
  readonly kvUsage?: number;
  /** The prefix cache's recent hit rate, 0..1, for people to read (the choice uses the index); absent = not reported. */
  readonly cacheHitRate?: number;
  /** Epoch ms (the control plane's clock) of the engine read. */
  readonly sampledAtMs: number;
}

// ---- keys and usage ------------------------------------------------------

export interface ApiKeyRecord {
  readonly id: string;
  /** The operator's label ("ci", "alice"); not secret. */
  readonly name: string;
  /** The first characters of the secret, for people to tell keys apart; never enough to use. */
  readonly prefix: string;
  /** Lower-case hex SHA-256 of the whole secret. */
  readonly hash: string;
  /** Model names (canonical) this key may use; null = every model. */
  readonly allowedModels: readonly string[] | null;
  /** Requests per minute; null = unlimited. */
  readonly requestsPerMinute: number | null;
  /** Prompt plus completion tokens per minute; null = unlimited. */
  readonly tokensPerMinute: number | null;
  /** Epoch ms after which the key is refused; null = never expires. */
  readonly expiresAtMs: number | null;
  readonly createdAtMs: number;
  readonly createdBy: string;
  /** Epoch ms the key was revoked; null = live. */
  readonly revokedAtMs: number | null;
  /**
   * The team the key belongs to; its limits above are already narrowed to
   * the team's. Absent = a key store without teams.
   */
  readonly team?: string;
  /** Its team's fair-share weight when a model queues requests (2 = twice the turns of 1); absent = 1. */
  readonly teamWeight?: number;
  /** The class its requests get when a model queues them (a header may lower it); absent = interactive. */
  readonly priority?: PriorityClass;
}

/**
 * Where keys live. `lookupByHash` is on every request's path: implementations
 * backed by a database keep a cache and may answer synchronously.
 */
export interface KeyStore {
  create(record: ApiKeyRecord): Promise<void> | void;
  list(): Promise<readonly ApiKeyRecord[]> | readonly ApiKeyRecord[];
  /** Marks the key revoked; false when no key has that id. */
  revoke(id: string, atMs: number): Promise<boolean> | boolean;
  lookupByHash(hash: string): Promise<ApiKeyRecord | undefined> | ApiKeyRecord | undefined;
  /**
   * Calls `listener` with the id of each key revoked from now on: by this
   * process, or (a store several control planes share) by another, once
   * this one has read it. The router ends the key's running requests.
   * Returns the unsubscribe.
   */
  onRevoked(listener: (keyId: string) => void): () => void;
}

/** How a key is looked up: the hash the KeyStore keeps, never the secret. */
export function hashKey(secret: string): string {
  // One call, no Hash object: this runs on every request the router admits.
  return hash('sha256', secret, 'hex');
}

export interface UsageEvent {
  /** The key's id; 'anonymous' when the listener runs without keys. */
  readonly keyId: string;
  /** The canonical model that answered (a fallback's name when one served). */
  readonly model: string;
  /** The API the client called: chat, completions, embeddings, rerank, score, transcriptions, tokenize, detokenize, messages, … */
  readonly endpoint: string;
  /**
   * The engine's figures; for a stream whose usage never came (it broke,
   * its client left, the engine ignores include_usage), lower bounds from
   * the prompt's size and the events relayed; zero for a whole answer
   * without usage.
   */
  readonly promptTokens: number;
  readonly completionTokens: number;
  /** The HTTP status the client got; 0 when the client went away first. */
  readonly status: number;
  /**
   * The replica whose engine answered, so a price derived from GPU-hours is
   * that replica's; absent = no engine answered (refused, failed before
   * one) or a sink's own record.
   */
  readonly replicaId?: string;
}

export interface UsageSink {
  /** Must not block or throw: it runs after the response, on the event loop. */
  record(event: UsageEvent): void;
}

// ---- kept responses (the Responses API) ----------------------------------

/** One kept response. */
export interface StoredResponse {
  /**
   * The response's id as the client saw it (`resp_…`): the router's own,
   * random (128 bits), whatever an engine answered. Unique per key; two
   * keys' responses are apart even under one id.
   */
  readonly id: string;
  /**
   * The id the engine gave it, where an engine serving the Responses API
   * natively answered and the router replaced its id; absent or null =
   * none other. A client of the same key that names it (in
   * previous_response_id, GET or DELETE) is served this response.
   */
  readonly engineId?: string | null;
  /** The key that made it; 'anonymous' when the listener asks no key. Only this key reads, continues or deletes it. */
  readonly keyId: string;
  /** The model's canonical name. */
  readonly model: string;
  readonly createdAtMs: number;
  /** The Response object as the client received it (status completed, incomplete or failed), returned by GET. */
  readonly response: Readonly<Record<string, unknown>>;
  /**
   * The conversation up to and including this response, as Responses input
   * items: the items of the response it continued (if any), this request's
   * input, then this response's output items. A request naming it as
   * previous_response_id continues from exactly these. Instructions are not
   * among them: as at OpenAI, each request brings its own.
   */
  readonly items: readonly unknown[];
}

/** Where responses are kept: in memory for a control plane without a store, in the store otherwise. */
export interface ResponseStore {
  /**
   * Keeps a response until its time to live passes. When the key's kept
   * responses then exceed its size cap, its oldest are dropped first (never
   * the one just kept).
   */
  put(response: StoredResponse): Promise<void>;
  /**
   * The response if this key kept it and it has not expired; undefined
   * otherwise (unknown, expired, deleted, another key's). `id` is the
   * router's id, or else an engine's id for one of this key's (its newest).
   */
  get(keyId: string, id: string): Promise<StoredResponse | undefined>;
  /** True when this key had it (by either id, as `get`) and it is now gone; false when there was nothing of this key's to delete. */
  delete(keyId: string, id: string): Promise<boolean>;
  /**
   * Output items of this key's kept, unexpired responses, by item id, for
   * the Responses API's `item_reference` input items (the AI SDK sends its
   * earlier answers' text as references when `store` is on). Ids not found
   * (unknown, expired, another key's) are absent from the map.
   */
  findItems(keyId: string, itemIds: readonly string[]): Promise<ReadonlyMap<string, unknown>>;
  /** Drops every response past its time to live; returns how many went. */
  sweep(nowMs: number): Promise<number>;
}

// ---- per-key limits --------------------------------------------------------

export interface LimitDecision {
  readonly ok: boolean;
  /** Seconds until a request would be admitted (for Retry-After); 0 when ok. */
  readonly retryAfterS: number;
  /** Which limit refused: 'requests' or 'tokens'; null when ok. */
  readonly limit: 'requests' | 'tokens' | null;
  /**
   * What is left of each limit after this request (rounded down, never
   * below 0); a limit the key does not have is absent. For OpenAI's
   * x-ratelimit-* headers, which clients read to pace themselves.
   */
  readonly remaining?: { readonly requests?: number; readonly tokens?: number };
  /**
   * Tokens taken from the key's balance at admission, to be settled with
   * `settle()` when the request ends; 0 when nothing was reserved (refused,
   * or the key has no token limit).
   */
  readonly reservedTokens?: number;
}

/** What the router asks of a limiter; RateLimiter is this process's own, src/control/leader has one shared through the store. */
export interface RequestLimiter {
  /**
   * Admits one request or says why not. `reserveTokens` (absent = 0) is what
   * the request may cost; with a token limit it must fit in what is left, and
   * is taken at once. The router refuses a request whose reservation
   * exceeds the per-minute limit before it asks (it could never fit); the
   * cap at that limit here is a backstop. With 0, a positive balance admits.
   */
  admit(
    keyId: string,
    requestsPerMinute: number | null,
    tokensPerMinute: number | null,
    reserveTokens?: number,
  ): LimitDecision;
  /** Ends a request: gives back its `reservedTokens` and charges what it really used (0 when it failed before any token). */
  settle(keyId: string, tokensPerMinute: number | null, reservedTokens: number, usedTokens: number): void;
}

// ---- budgets (src/control/budgets implements them) --------------------------

/** A request's hold on the budgets that apply to it, settled once when it ends. */
export interface BudgetHold {
  /**
   * Charges what it used (tokens, and their price for money budgets) in
   * place of what admission reserved. `replicaId`: the replica that
   * answered, whose measured GPU cost prices a model without a token price;
   * absent = none answered.
   */
  settle(model: string, promptTokens: number, completionTokens: number, replicaId?: string): void;
  /** Gives the whole reservation back: the request cost nothing (count_tokens, or refused after admission). */
  release(): void;
}

/** `hold` null = no budget applies to the key: nothing to settle. */
export type BudgetDecision =
  | { readonly ok: true; readonly hold: BudgetHold | null }
  | {
      readonly ok: false;
      /** The budget in words, for the client: "team ml's hard budget of 1000000 tokens per day". */
      readonly budget: string;
      /** Epoch ms at which the budget's period starts again. */
      readonly resetAtMs: number;
      /** Seconds until then, at least 1 (Retry-After); when unsettled, seconds until it is worth asking again. */
      readonly retryAfterS: number;
      /** True: not known to be spent, the lease ran dry and neither a renewal nor running requests' holds gave room in time (503); absent: spent, or less left than the request may use (429). */
      readonly unsettled?: boolean;
    };

/**
 * Budgets per team and per key, in tokens and money. Answers from memory:
 * the implementation spends leases it took from the store, never asking it
 * on a request's path, except for a request that finds its lease dry while
 * the store may still have room: that one waits (bounded) for a renewal.
 */
export interface BudgetGate {
  /**
   * Admits a request of `key` to `model` that may cost up to this many tokens, or names the budget that refuses it.
   * At once in the common case; a promise only when the request waits for a lease's renewal.
   */
  admit(
    key: ApiKeyRecord,
    model: string,
    promptTokens: number,
    completionTokens: number,
  ): BudgetDecision | Promise<BudgetDecision>;
  /** What these tokens of `model` cost in US dollars; undefined = the model has no price. */
  cost(model: string, promptTokens: number, completionTokens: number): number | undefined;
}
