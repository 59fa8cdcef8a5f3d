// A request's timeline: its record (request-log.ts) told as the steps it
// went through, in order, each in plain words with its numbers: admission,
// the cold hold, every attempt with the candidates the chooser weighed and
// the rule that picked the winner, the backoffs and fallbacks between
// attempts, the first token, tokens, cost, the end and the trace id. A pure
// function of the record, run when someone asks (`ctl request ID`, the
// dashboard), never on the request path: the router keeps numbers only.
import type { RequestDetailView, RequestEventView } from '../../api/types.js';
import type { ChoiceRecord, RequestAttempt, RequestRecord } from './request-log.js';
import { causeOf, requestRecordView } from './request-log.js';

/** The record with its timeline, for GET /api/v1/requests/{id}; `sameId` as requestRecordView's. */
export function requestDetailView(r: RequestRecord, sameId = 0): RequestDetailView {
  return { ...requestRecordView(r, sameId), timeline: timelineOf(r) };
}

/**
 * The rule in words, as the end of "… won as <words>". Keyed by string, not
 * PickRule: a rule added without words here is shown by its name.
 */
const RULE_WORDS: Readonly<Record<string, string>> = {
  'only-candidate': 'the only candidate',
  'least-load': 'the least expected load',
  'least-load-tie': 'the least expected load, tied with others, one of them drawn at random',
  'two-choices': 'fewer in flight of two candidates drawn at random (least-inflight)',
  'prefix-owner': "the prompt prefix's owner on the ring, within the load bound",
  'prefix-next': "the next on the ring within the load bound: the prefix's owner was over it",
  'prefix-all-over': 'the least loaded: every candidate was over the load bound',
  'prefix-cache': 'the lowest load plus uncached prompt (prefix-cache routing)',
  'prefix-cache-tie': 'the lowest load plus uncached prompt, tied with others, one of them drawn at random',
};

/**
 * The steps of `r` in the order they happened (by time, then as recorded).
 * Times are ms after arrival, rounded; an attempt of a record without start
 * times (an older record) is placed after the step before it.
 */
export function timelineOf(r: RequestRecord): RequestEventView[] {
  const events: RequestEventView[] = [];
  const add = (atMs: number, kind: string, says: string, attempt?: number) =>
    events.push({ at_ms: Math.max(0, Math.round(atMs)), kind, says, ...(attempt === undefined ? {} : { attempt }) });

  const who = r.key === undefined ? 'no API key' : `API key ${r.key}…`;
  add(0, 'arrived', `arrived: ${r.endpoint}${r.stream ? ' (streamed)' : ''} for model ${r.model}, ${who}`);

  const a = r.admission;
  if (a) {
    const limit = a.limit === undefined ? '' : ` (${a.limit})`;
    if (a.outcome === 'limited') add(a.doneMs, 'limited', `refused by a limit${limit} after ${ms(a.doneMs)}`);
    else if (a.outcome === 'queued')
      add(a.doneMs, 'queued', `admitted after waiting ${ms(a.queuedMs ?? 0)} in a queue${limit}`);
    else add(a.doneMs, 'admitted', `admitted after ${ms(a.doneMs)} (body, key and limits checked)`);
  }

  const c = r.cold;
  if (c) {
    if (c.end === 'served_by_fallback') {
      add(
        c.startMs,
        'cold_skipped',
        `model ${c.model} has no ready replica: fallback_while_cold sends it to a ready fallback instead of waiting`,
      );
    } else {
      add(c.startMs, 'cold_hold', `held: model ${c.model} has no ready replica; waiting for one to start`);
      const end = c.startMs + c.heldMs;
      const held = ms(c.heldMs);
      if (c.end === 'ready')
        add(end, 'cold_ready', `replica ${c.replica ?? '?'} of ${c.model} ready after ${held} held`);
      else if (c.end === 'gave_up')
        add(end, 'cold_gave_up', `gave up on ${c.model} after ${held} held: no replica became ready in time`);
      else add(end, 'cold_ended', `the hold ended after ${held}: ${HOLD_END[c.end]}`);
    }
  }

  let prevModel = r.cold?.end === 'served_by_fallback' ? undefined : r.model;
  let lastAt = events[events.length - 1]!.at_ms;
  r.attempts.forEach((t, i) => {
    const n = i + 1;
    const start = t.startMs ?? lastAt;
    if (t.queuedMs !== undefined)
      add(
        start - (t.backoffMs ?? 0) - t.queuedMs,
        'queued',
        `waited ${ms(t.queuedMs)} in ${t.model}'s fair-share queue: its replicas were at capacity`,
        n,
      );
    if (t.backoffMs !== undefined) add(start - t.backoffMs, 'backoff', `waited ${ms(t.backoffMs)} before retrying`, n);
    if (t.model !== prevModel) {
      const why =
        prevModel === undefined
          ? `model ${r.model} had no ready replica`
          : `no replica of ${prevModel} was left to try`;
      add(start, 'fallback', `falls back to model ${t.model}: ${why}`, n);
    }
    prevModel = t.model;
    add(start, 'chosen', chosenWords(n, t), n);
    const end = start + t.durationMs;
    if (t.outcome === 'failed')
      add(end, 'failed', `attempt ${n} failed after ${ms(t.durationMs)}: ${t.reason ?? '?'}`, n);
    else
      add(
        end,
        'answered',
        `attempt ${n}: replica ${t.replica} answered ${r.status}, its answer ended after ${ms(t.durationMs)}`,
        n,
      );
    lastAt = end;
  });

  if (r.ttftMs !== undefined) add(r.ttftMs, 'first_token', `first byte of the answer at ${ms(r.ttftMs)}`);
  if (r.broken !== undefined) add(r.durationMs, 'broken', `the answer broke after its first byte: ${r.broken}`);
  if (r.promptTokens !== undefined || r.completionTokens !== undefined)
    add(
      r.durationMs,
      'tokens',
      `${r.promptTokens ?? '?'} prompt tokens, ${r.completionTokens ?? '?'} completion tokens`,
    );
  if (r.cost !== undefined)
    add(r.durationMs, 'cost', `cost ${formatNumber(r.cost, 6)} (in the price table's currency)`);
  if (r.failure && !r.clientGone) add(r.durationMs, 'refused', `refused: ${r.failure.message} (${r.failure.code})`);
  add(r.durationMs, 'done', doneWords(r));

  // Stable: steps at the same time keep the order they were recorded in.
  return events
    .map((e, i) => [e, i] as const)
    .sort((x, y) => x[0].at_ms - y[0].at_ms || x[1] - y[1])
    .map((x) => x[0]);
}

const HOLD_END: Record<'client_gone' | 'timed_out' | 'revoked', string> = {
  client_gone: 'the client went away',
  timed_out: 'the request ran out of time',
  revoked: 'its API key was revoked',
};

function chosenWords(n: number, t: RequestAttempt): string {
  const on = t.nodes?.length ? ` on ${t.nodes.join(', ')}` : '';
  const rule = t.rule === undefined ? '' : ` by rule ${t.rule}`;
  const head = `attempt ${n}: replica ${t.replica} of ${t.model}${on}${rule}`;
  const c = t.choice;
  if (!c) return head;
  return `${head}; won as ${ruleWords(c)}; candidates: ${candidatesWords(c, t.replica)}`;
}

function ruleWords(c: ChoiceRecord): string {
  const words = RULE_WORDS[c.by] ?? c.by;
  if (c.by === 'prefix-owner' || c.by === 'prefix-next' || c.by === 'prefix-all-over') {
    const owner = c.ringOwner === undefined ? '' : `, ring owner ${c.ringOwner}`;
    return `${words} (bound ${c.bound ?? '?'}${owner})`;
  }
  return words;
}

function candidatesWords(c: ChoiceRecord, winner: string): string {
  return c.candidates
    .map((k) => {
      const src = k.sampled ? 'engine sample' : 'in flight here';
      const hit = k.expectedHit === undefined ? '' : `, expected prefix hit ${Math.round(k.expectedHit * 100)}%`;
      return `${k.replica}${k.replica === winner ? '*' : ''} load ${formatNumber(k.load, 2)} (${src}${hit})`;
    })
    .join(', ');
}

function doneWords(r: RequestRecord): string {
  const trace = r.traceId === undefined ? '' : `; trace ${r.traceId}`;
  if (r.clientGone) return `the client went away after ${ms(r.durationMs)}${trace}`;
  const cause = causeOf(r);
  const answered = r.attempts.find((t) => t.outcome === 'answered');
  const by = answered
    ? ` from replica ${answered.replica}${answered.model !== r.model ? ` (fallback ${answered.model})` : ''}`
    : '';
  return `done: ${r.status}${by} after ${ms(r.durationMs)}${cause === undefined || r.failure ? '' : ` (${cause})`}${trace}`;
}

function ms(v: number): string {
  return `${Math.round(v)} ms`;
}

/** At most `digits` decimals, no trailing zeros: 1.5, 0.000123, 2. */
function formatNumber(v: number, digits: number): string {
  return String(Number(v.toFixed(digits)));
}
