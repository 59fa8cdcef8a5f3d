// Errors llmgw raises on purpose. One base class with a stable `code` so that
// callers branch on the code, never on message text; the message is written
// for the person who has to fix the problem. Every code is listed in
// docs/errors.md, and a test keeps the two in step.

/** Every code llmgw can raise, with the HTTP status it maps to. */
export const ERROR_CODES = {
  LLMGW_CONFIG_INVALID: 400,
  LLMGW_BAD_REQUEST: 400,
  LLMGW_CONTEXT_LENGTH_EXCEEDED: 400,
  LLMGW_ENDPOINT_NOT_SERVED: 400,
  LLMGW_INVALID_JSON: 400,
  LLMGW_BODY_TOO_LARGE: 413,
  LLMGW_UNAUTHORIZED: 401,
  LLMGW_FORBIDDEN: 403,
  LLMGW_NOT_FOUND: 404,
  LLMGW_METHOD_NOT_ALLOWED: 405,
  LLMGW_REQUEST_TIMEOUT: 408,
  LLMGW_UNSUPPORTED_MEDIA_TYPE: 415,
  LLMGW_CROSS_SITE: 403,
  LLMGW_HOST_NOT_ALLOWED: 421,
  LLMGW_CONFLICT: 409,
  LLMGW_NO_STORE: 501,
  LLMGW_CATALOG_INVALID: 400,
  LLMGW_CATALOG_CONFLICT: 400,
  LLMGW_MODEL_NOT_FOUND: 404,
  LLMGW_MODEL_IN_USE: 400,
  LLMGW_MODEL_FROM_FILE: 400,
  LLMGW_NODE_NOT_FOUND: 404,
  LLMGW_NODE_STATE_INVALID: 400,
  LLMGW_JOIN_REFUSED: 401,
  LLMGW_NODE_ID_TAKEN: 409,
  LLMGW_NODE_HAS_REPLICAS: 409,
  LLMGW_PLACEMENT_NO_FIT: 400,
  LLMGW_STORE_UNAVAILABLE: 503,
  LLMGW_STORE_MIGRATION: 500,
  LLMGW_GATEWAY_WORKER_FAILED: 500,
  LLMGW_STALE_LEADER: 409,
  LLMGW_ILLEGAL_STATE: 500,
  LLMGW_PROBE_FAILED: 500,
  LLMGW_FETCH_FAILED: 502,
  LLMGW_UPSTREAM: 502,
  LLMGW_CONTROL_UNANSWERED: 504,
  LLMGW_NO_REPLICA: 503,
  LLMGW_PREVIOUS_RESPONSE_NOT_FOUND: 400,
  LLMGW_RATE_LIMITED: 429,
  LLMGW_BUDGET_EXCEEDED: 429,
  LLMGW_BUDGET_UNSETTLED: 503,
  LLMGW_QUEUE_FULL: 429,
  LLMGW_QUEUE_TIMEOUT: 503,
  LLMGW_REMOTE_BUSY: 429,
  LLMGW_REQUEST_OVER_TOKEN_LIMIT: 429,
  LLMGW_SIMULATE_SPEC_INVALID: 400,
  LLMGW_SOURCE_INVALID: 400,
  LLMGW_FETCH_NOT_FOUND: 404,
  LLMGW_FETCH_UNAUTHORIZED: 401,
  LLMGW_FETCH_VERIFY_FAILED: 502,
  LLMGW_DISK_FULL: 507,
  LLMGW_CACHE_REFUSED: 403,
  LLMGW_ENGINE_UNKNOWN: 400,
  LLMGW_ENGINE_START_FAILED: 500,
  LLMGW_ENGINE_NOT_READY: 503,
  LLMGW_ENGINE_BUSY: 429,
  LLMGW_ENGINE_EXITED: 502,
  LLMGW_ENGINE_UNRESPONSIVE: 504,
  LLMGW_PORT_EXHAUSTED: 503,
  LLMGW_GGUF_INVALID: 400,
  LLMGW_TLS_FILE_EXISTS: 409,
  LLMGW_ANSWER_INVALID: 500,
  LLMGW_BATCH_INPUT_INVALID: 400,
  LLMGW_FILE_NOT_FOUND: 404,
  LLMGW_BATCH_NOT_FOUND: 404,
  LLMGW_BATCH_NOT_CANCELLABLE: 409,
  LLMGW_BATCHES_UNAVAILABLE: 501,
  LLMGW_INTERNAL: 500,
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

export interface LlmgwErrorOptions {
  /** Typed facts about the failure (ids, sizes), safe to log: never secrets. */
  context?: Record<string, unknown>;
  cause?: unknown;
  /** Overrides the code's usual status where one code serves two (rare). */
  status?: number;
}

export class LlmgwError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly context: Readonly<Record<string, unknown>>;

  constructor(code: ErrorCode, message: string, options: LlmgwErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'LlmgwError';
    this.code = code;
    this.status = options.status ?? ERROR_CODES[code];
    this.context = options.context ?? {};
  }
}

/** Raised when a state machine is driven the wrong way: a bug, never user input. */
export class IllegalStateError extends LlmgwError {
  constructor(message: string, context?: Record<string, unknown>) {
    super('LLMGW_ILLEGAL_STATE', message, context ? { context } : {});
    this.name = 'IllegalStateError';
  }
}

/**
 * Several problems found at once (a catalog entry with three mistakes), so the
 * operator fixes them in one round instead of three.
 */
export class ValidationError extends LlmgwError {
  readonly problems: readonly string[];

  constructor(code: ErrorCode, problems: readonly string[], lead?: string) {
    const body = problems.length === 1 ? problems[0]! : problems.map((p) => `- ${p}`).join('\n');
    super(code, lead ? `${lead}${problems.length === 1 ? ': ' : ':\n'}${body}` : body);
    this.name = 'ValidationError';
    this.problems = problems;
  }
}

/**
 * A write to replicas or shards from a control plane whose leadership epoch
 * is no longer the store's: another instance took the lead while this one was
 * paused or cut off. The write is refused whole, so a leader that wakes up late
 * cannot undo its successor's work; the instance steps down on seeing it.
 */
export class StaleLeaderError extends LlmgwError {
  constructor(
    readonly role: string,
    readonly heldEpoch: number | null,
    readonly currentEpoch: number | null,
  ) {
    super(
      'LLMGW_STALE_LEADER',
      heldEpoch === null
        ? `this control plane does not lead the ${role}, so it may not write replicas or shards; the leader does`
        : `this control plane led the ${role} at epoch ${heldEpoch}, but the store is at epoch ${currentEpoch ?? 'none'}: another instance leads now, so this write was refused`,
      { context: { role, heldEpoch, currentEpoch } },
    );
    this.name = 'StaleLeaderError';
  }
}

/** OpenAI's `type` for a status: what its SDKs and users expect to read. */
export function openAiErrorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 429) return 'rate_limit_error';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}

/**
 * OpenAI's `code` for the refusals it has one for, which clients branch on
 * (an SDK's retry on `rate_limit_exceeded`, a framework trimming history on
 * `context_length_exceeded`); llmgw's own code otherwise. Here rather than
 * in the router because the builtin engine answers in the same shape.
 */
const OPENAI_CODES: Partial<Record<string, string>> = {
  LLMGW_UNAUTHORIZED: 'invalid_api_key',
  LLMGW_MODEL_NOT_FOUND: 'model_not_found',
  LLMGW_RATE_LIMITED: 'rate_limit_exceeded',
  // A team's share of a saturated model's queue is full: clients should back off and retry, as for a rate limit.
  LLMGW_QUEUE_FULL: 'rate_limit_exceeded',
  // OpenAI answers a request too large for a tokens-per-minute limit as rate_limit_exceeded too ("Request too large").
  LLMGW_REQUEST_OVER_TOKEN_LIMIT: 'rate_limit_exceeded',
  LLMGW_CONTEXT_LENGTH_EXCEEDED: 'context_length_exceeded',
  LLMGW_PREVIOUS_RESPONSE_NOT_FOUND: 'previous_response_not_found',
};

export function openAiErrorCode(code: string): string {
  return OPENAI_CODES[code] ?? code;
}

export function isLlmgwError(err: unknown): err is LlmgwError {
  return err instanceof LlmgwError;
}
