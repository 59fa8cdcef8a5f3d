// The request log: the last requests this router served, each with the
// replica (and nodes) every attempt went to, why a failed attempt failed,
// the status the client got and its cause, timings and tokens. It answers
// "which replica served this request, and why did it fail" by the
// x-request-id a client quotes. Kept in memory, bounded (rings), per
// control plane: with several instances each knows the requests its own
// client listener took. Separate from metrics (counts, no ids) and from
// usage (per key and model, in the store).
import type { RequestAttemptView, RequestChoiceView, RequestRecordView } from '../../api/types.js';
import type { PickRule } from './pick.js';
import {
  isLimitRefusal,
  newestOfBoth,
  RecordRing,
  RefusalRing,
  REFUSAL_LOG_CAPACITY,
  REFUSALS_PER_KEY_AND_REASON,
} from './request-rings.js';

/** How many requests the log keeps by default: ~10k records of a few hundred bytes each. */
export const REQUEST_LOG_CAPACITY = 10_000;

/** One replica the chooser weighed for an attempt, and its score. */
export interface CandidateScore {
  replica: string;
  /**
   * The score the choice compared, in requests, lower is better: expectedLoad
   * (pick.ts) under least-load and prefix routing, this router's in-flight
   * count under least-inflight, expectedLoad plus the uncached prompt's
   * weight under prefix-cache (prefix-cache/score.ts).
   */
  load: number;
  /** True when the score came from a fresh engine sample; absent = this router's own in-flight count. */
  sampled?: boolean;
  /** The share of the prompt the replica's prefix cache is expected to hold, 0..1; absent = not estimated. */
  expectedHit?: number;
}

/**
 * Why an attempt went where it went: every candidate with its score, and
 * the rule that picked the winner. Filled by the chooser with numbers only
 * (no words on the hot path); timelineOf() and the views say it in words.
 */
export interface ChoiceRecord {
  by: PickRule;
  /** In the order the chooser saw them; the ones already tried for this model are not among them. */
  candidates: CandidateScore[];
  /** Prefix routing: the replica owning the prompt prefix's point on the ring; absent = not prefix routing. */
  ringOwner?: string;
  /** Prefix routing: the most load a replica may carry after taking the request (CHWBL's bound). */
  bound?: number;
}

export interface RequestAttempt {
  model: string;
  replica: string;
  /** Absent = the router does not know the replica's nodes. */
  nodes?: readonly string[];
  outcome: 'answered' | 'failed';
  /** Absent when answered. */
  reason?: string;
  durationMs: number;
  /** When it was sent, ms after the request arrived; absent in records made before timelines. */
  startMs?: number;
  /** The wait before it (jittered backoff after a failed attempt), ms; absent = none. */
  backoffMs?: number;
  /** The wait for a place in the model's fair-share queue (its replicas were at capacity), ms; absent = none. */
  queuedMs?: number;
  /** Why this replica; absent = the chooser did not say (a path that does not explain). */
  choice?: ChoiceRecord;
  /** The routing rule that sent this attempt where it went (a spill-over to a remote endpoint, …); absent = the model's own replicas. */
  rule?: string;
}

/** How the request got through admission. */
export interface AdmissionRecord {
  /** admitted: at once; queued: it waited `queuedMs` for room under a limit first; limited: a limit refused it. */
  outcome: 'admitted' | 'limited' | 'queued';
  /** When admission ended, ms after the request arrived (reading the body, the key, the checks). */
  doneMs: number;
  /** How long it waited in a queue; absent = it did not. */
  queuedMs?: number;
  /** The limit that queued or refused it, in words a timeline can quote ("requests per minute"); absent = none. */
  limit?: string;
}

/** The cold hold: the request waited for a model with no ready replica. */
export interface ColdRecord {
  /** The model it waited for (the one requested). */
  model: string;
  /** When the hold began, ms after arrival. */
  startMs: number;
  /** How long it was held; 0 when it did not wait (served_by_fallback). */
  heldMs: number;
  /**
   * ready: a replica became ready; gave_up: none did within the cold start
   * timeout; client_gone, timed_out, revoked: the request ended first;
   * served_by_fallback: it did not wait, a ready fallback took it
   * (fallback_while_cold).
   */
  end: 'ready' | 'gave_up' | 'client_gone' | 'timed_out' | 'revoked' | 'served_by_fallback';
  /** The replica that was ready when the hold ended; absent = none was. */
  replica?: string;
}

/** One request, filled in as it goes; added to the log when the router is done with it. */
export interface RequestRecord {
  id: string;
  /** Epoch ms of arrival. */
  atMs: number;
  model: string;
  endpoint: string;
  stream: boolean;
  /** The API key's prefix; absent = no key. */
  key?: string;
  /** 0 until the request ends. */
  status: number;
  clientGone: boolean;
  timedOut: boolean;
  /** What the router told the client when it refused or failed the request; absent = nothing. */
  failure?: { code: string; message: string };
  /** The engine's answer broke after the first byte, and why. */
  broken?: string;
  attempts: RequestAttempt[];
  /** Absent = the record has no admission step (made before timelines, or by a test). */
  admission?: AdmissionRecord;
  /** Absent = the model had a ready replica: nothing was held. */
  cold?: ColdRecord;
  heldMs?: number;
  durationMs: number;
  ttftMs?: number;
  promptTokens?: number;
  completionTokens?: number;
  /** What the request cost, in the currency of the price table; absent = no price for its model. */
  cost?: number;
  /** The routing rule that sent the whole request where it went (a split's variant, …); absent = none, the model asked for. */
  rule?: string;
  /** The OpenTelemetry trace id (32 hex digits) of its span; absent = tracing off or not sampled. */
  traceId?: string;
}

export interface RequestFilter {
  /** Only the requests that carried this x-request-id (a client may reuse one). */
  id?: string;
  model?: string;
  status?: number;
  /** True: only requests whose outcome is not ok. */
  failed?: boolean;
  /** Absent or 0 = 50. */
  limit?: number;
}

/**
 * The log: the requests the router took in one ring, and those a limit
 * refused before any attempt in another, bounded per key and reason
 * (request-rings.ts), so a key hammering its limit cannot push answered
 * requests out. Read as one: by id, and listed newest first.
 */
export class RequestLog {
  private readonly taken: RecordRing;
  private readonly refused: RefusalRing;
  private seq = 0;

  /**
   * `capacity` 0 or absent = REQUEST_LOG_CAPACITY requests taken; refusals
   * are kept apart, `refusals.capacity` in all (0 or absent =
   * REFUSAL_LOG_CAPACITY) and `refusals.perKeyAndReason` of one key and
   * reason (0 or absent = REFUSALS_PER_KEY_AND_REASON).
   */
  constructor(capacity = 0, refusals: { readonly capacity?: number; readonly perKeyAndReason?: number } = {}) {
    this.taken = new RecordRing(capacity || REQUEST_LOG_CAPACITY);
    this.refused = new RefusalRing(
      refusals.capacity || REFUSAL_LOG_CAPACITY,
      refusals.perKeyAndReason || REFUSALS_PER_KEY_AND_REASON,
    );
  }

  /** How many requests taken (answered or failed) the log keeps; refusals are kept apart, besides these. */
  get capacity(): number {
    return this.taken.capacity;
  }

  /** How many requests taken it holds now; refusals are not counted. */
  get size(): number {
    return this.taken.size;
  }

  /** Keeps a finished request, dropping the oldest of its ring when full. A record may still be filled in afterwards (tokens come later). */
  add(record: RequestRecord): void {
    const held = { record, seq: ++this.seq };
    if (isLimitRefusal(record)) this.refused.add(held);
    else this.taken.add(held);
  }

  /** The newest request that carried this id. */
  get(id: string): RequestRecord | undefined {
    const a = this.taken.newest(id);
    const b = this.refused.newest(id);
    return (a && b ? (a.seq > b.seq ? a : b) : (a ?? b))?.record;
  }

  /** How many requests in the log carried this id; 0 = none. */
  countWithId(id: string): number {
    return this.taken.countWithId(id) + this.refused.countWithId(id);
  }

  /** Newest first, refusals among the rest. */
  list(filter: RequestFilter = {}): RequestRecord[] {
    const limit = filter.limit || 50;
    const out: RequestRecord[] = [];
    for (const r of newestOfBoth(this.taken.newestFirst(), this.refused.newestFirst())) {
      if (out.length >= limit) break;
      if (filter.id !== undefined && r.id !== filter.id) continue;
      if (filter.model !== undefined && r.model !== filter.model) continue;
      if (filter.status !== undefined && r.status !== filter.status) continue;
      if (filter.failed && outcomeOf(r) === 'ok') continue;
      out.push(r);
    }
    return out;
  }
}

/**
 * The kind of a request's end: ok, client_gone, timed_out, broken (after
 * the first byte), or the failure's cause: no_replica, upstream_failed,
 * engine_error (the engine's own 4xx/5xx), rate_limited, refused.
 */
export function outcomeOf(r: RequestRecord): string {
  if (r.clientGone) return 'client_gone';
  if (r.timedOut) return 'timed_out';
  if (r.broken !== undefined) return 'broken';
  if (r.failure) {
    if (r.failure.code === 'LLMGW_NO_REPLICA') return 'no_replica';
    if (r.failure.code === 'LLMGW_UPSTREAM') return 'upstream_failed';
    if (r.failure.code === 'LLMGW_RATE_LIMITED') return 'rate_limited';
    return 'refused';
  }
  if (r.status >= 400) return 'engine_error';
  return 'ok';
}

/** The cause in words, or undefined for a request that succeeded. */
export function causeOf(r: RequestRecord): string | undefined {
  if (r.clientGone) return `the client went away after ${r.durationMs} ms${lastAttemptNote(r)}`;
  if (r.timedOut) return r.failure?.message ?? 'the request took longer than the router allows and was stopped';
  if (r.broken !== undefined) return `the answer broke after its first byte (no retry is possible then): ${r.broken}`;
  if (r.failure) return r.failure.message;
  const answered = r.attempts.find((a) => a.outcome === 'answered');
  if (r.status >= 400) return `the engine of replica ${answered?.replica ?? '?'} answered ${r.status}`;
  return undefined;
}

function lastAttemptNote(r: RequestRecord): string {
  const last = r.attempts[r.attempts.length - 1];
  return last ? ` (last at replica ${last.replica})` : '';
}

/** `sameId`: how many other requests in the log carried this one's id (0 or absent = none). */
export function requestRecordView(r: RequestRecord, sameId = 0): RequestRecordView {
  const answered = r.attempts.find((a) => a.outcome === 'answered');
  const cause = causeOf(r);
  return {
    id: r.id,
    ...(sameId > 0 ? { same_id: sameId } : {}),
    at: new Date(r.atMs).toISOString(),
    model: r.model,
    endpoint: r.endpoint,
    stream: r.stream,
    ...(r.key === undefined ? {} : { key: r.key }),
    status: r.clientGone ? 499 : r.status,
    outcome: outcomeOf(r),
    ...(cause === undefined ? {} : { cause }),
    ...(answered ? { replica: answered.replica } : {}),
    ...(answered?.nodes ? { nodes: [...answered.nodes] } : {}),
    ...(answered && answered.model !== r.model ? { fallback: answered.model } : {}),
    attempts: r.attempts.map((a): RequestAttemptView => ({
      model: a.model,
      replica: a.replica,
      ...(a.nodes ? { nodes: [...a.nodes] } : {}),
      outcome: a.outcome,
      ...(a.reason === undefined ? {} : { reason: a.reason }),
      ...(statusIn(a.reason) === undefined ? {} : { status: statusIn(a.reason)! }),
      duration_ms: Math.round(a.durationMs),
      ...(a.startMs === undefined ? {} : { start_ms: Math.round(a.startMs) }),
      ...(a.backoffMs === undefined ? {} : { backoff_ms: Math.round(a.backoffMs) }),
      ...(a.choice === undefined ? {} : { choice: choiceView(a.choice) }),
      ...(a.rule === undefined ? {} : { rule: a.rule }),
    })),
    ...(r.heldMs === undefined ? {} : { held_ms: Math.round(r.heldMs) }),
    duration_ms: Math.round(r.durationMs),
    ...(r.ttftMs === undefined ? {} : { ttft_ms: Math.round(r.ttftMs) }),
    ...(r.promptTokens === undefined ? {} : { prompt_tokens: r.promptTokens }),
    ...(r.completionTokens === undefined ? {} : { completion_tokens: r.completionTokens }),
    ...(r.admission === undefined ? {} : { admission: admissionView(r.admission) }),
    ...(r.cold === undefined ? {} : { cold: coldView(r.cold) }),
    ...(r.cost === undefined ? {} : { cost: r.cost }),
    ...(r.rule === undefined ? {} : { rule: r.rule }),
    ...(r.traceId === undefined ? {} : { trace_id: r.traceId }),
  };
}

function admissionView(a: AdmissionRecord): NonNullable<RequestRecordView['admission']> {
  return {
    outcome: a.outcome,
    done_ms: Math.round(a.doneMs),
    ...(a.queuedMs === undefined ? {} : { queued_ms: Math.round(a.queuedMs) }),
    ...(a.limit === undefined ? {} : { limit: a.limit }),
  };
}

function coldView(c: ColdRecord): NonNullable<RequestRecordView['cold']> {
  return {
    model: c.model,
    start_ms: Math.round(c.startMs),
    held_ms: Math.round(c.heldMs),
    end: c.end,
    ...(c.replica === undefined ? {} : { replica: c.replica }),
  };
}

/** The choice as the admin API shows it: the same numbers, snake case, loads to 3 decimals. */
export function choiceView(c: ChoiceRecord): RequestChoiceView {
  return {
    by: c.by,
    candidates: c.candidates.map((k) => ({
      replica: k.replica,
      load: Number(k.load.toFixed(3)),
      ...(k.sampled ? { sampled: true } : {}),
      ...(k.expectedHit === undefined ? {} : { expected_hit: k.expectedHit }),
    })),
    ...(c.ringOwner === undefined ? {} : { ring_owner: c.ringOwner }),
    ...(c.bound === undefined ? {} : { bound: c.bound }),
  };
}

/** The engine's status in a retry reason ("the engine answered 503 …"); undefined = none named. */
function statusIn(reason: string | undefined): number | undefined {
  const m = reason ? /\banswered (\d{3})\b/.exec(reason) : null;
  return m ? Number(m[1]) : undefined;
}

/** A request's record as the router opens it, once admission let it through `admittedMs` after it arrived. */
export function newRecord(
  id: string,
  atMs: number,
  model: string,
  endpoint: string,
  stream: boolean,
  o: { readonly key: string | undefined; readonly rule: string | null | undefined; readonly admittedMs: number },
): RequestRecord {
  return {
    ...(o.rule ? { rule: o.rule } : {}),
    id,
    atMs,
    model,
    endpoint,
    stream,
    ...(o.key !== undefined ? { key: o.key } : {}),
    status: 0,
    clientGone: false,
    timedOut: false,
    attempts: [],
    admission: { outcome: 'admitted', doneMs: o.admittedMs },
    durationMs: 0,
  };
}

/**
 * The cold hold's record once it ended: `fromMs` is performance.now() when
 * it began, `ready` the model's candidates after it (the first is named as
 * the replica it waited for). How it ended is read off the request's flags.
 */
export function coldRecord(
  ex: {
    readonly startedAt: number;
    readonly clientGone: boolean;
    readonly timedOut: boolean;
    readonly revoked: boolean;
  },
  model: string,
  fromMs: number,
  heldMs: number,
  ready: readonly { readonly id: string }[],
): ColdRecord {
  const end: ColdRecord['end'] = ex.clientGone
    ? 'client_gone'
    : ex.timedOut
      ? 'timed_out'
      : ex.revoked
        ? 'revoked'
        : ready.length > 0
          ? 'ready'
          : 'gave_up';
  const out: ColdRecord = { model, startMs: fromMs - ex.startedAt, heldMs, end };
  if (ready.length > 0) out.replica = ready[0]!.id;
  return out;
}
