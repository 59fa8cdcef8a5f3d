// A request one replica cannot serve as the client wrote it: a remote that
// speaks another API (src/gateway/remote/foreign.ts) has no counterpart for
// one of its fields (n > 1 to Anthropic, a stop sequence to the Responses
// API). That says nothing of the replica's health and nothing a wait would
// change, so the attempt loop moves on to the next replica at once, without
// backoff: a replica speaking Chat Completions takes the request as written,
// which is what its user expects of a model with such a replica. Only when
// every failed attempt was turned away so is the client answered, with a 400
// in its dialect naming the field: it is the request that must change, not
// the fleet (a 502 would have sent the client's SDK retrying in vain).
// Apart from the attempt loop so the loop carries one small tally, and the
// decision is a pure function tested as a table.
import type { Logger } from 'pino';
import { writeErrorBody } from './errors.js';
import type { Exchange } from './exchange.js';
import type { Outcome } from './relay.js';
import { renameParams } from './param-names.js';

/** The field a replica could not express, and why in words that name it. */
export interface Unservable {
  /** The top-level field of the internal chat call (`stop`, `n`, `messages`). */
  readonly param: string;
  /** What could not be expressed, naming the field ("stop: the remote speaks … which has no counterpart"). */
  readonly message: string;
}

/** A retry outcome that also says the request, not the replica, was at fault. Rides on relay.ts's Outcome. */
export type UnservableRetry = Extract<Outcome, { kind: 'retry' }> & { readonly unservable: Unservable };

export function unservableRetry(reason: string, unservable: Unservable): UnservableRetry {
  return { kind: 'retry', reason, unservable };
}

/** One request's failed attempts, as far as they were turned away for a field; null before its first failure. */
export interface UnservableTally {
  /** The first field a replica could not express; null = no attempt was turned away for one. */
  readonly first: Unservable | null;
  /** Every failed attempt so far was turned away for a field: the client's request is the cause. */
  readonly all: boolean;
  /** The latest failed attempt was: the next one waits no backoff. */
  readonly last: boolean;
}

/** The tally after one more failed attempt (`o`, a retry or a refused stream_options). Pure. */
export function tallyUnservable(tally: UnservableTally | null, o: Outcome): UnservableTally {
  const u = (o as Partial<UnservableRetry>).unservable;
  return {
    first: tally?.first ?? u ?? null,
    all: (tally === null || tally.all) && u !== undefined,
    last: u !== undefined,
  };
}

/** What the client is told when every attempt at `model` (`attempts` of them) was turned away for `u`'s field. */
export function unservableMessage(model: string, u: Unservable, attempts: number): string {
  const tried = attempts === 1 ? 'the one replica tried' : `each of the ${attempts} replicas tried`;
  return (
    `model \`${model}\` cannot take this request as written: ${u.message} (${tried} is a remote speaking another API ` +
    `than Chat Completions); change or leave out \`${u.param}\`, or ask for a model whose replicas speak Chat Completions`
  );
}

/** Writes the 400 in the client's dialect, naming the field, and records it as the request's failure; returns 400. */
export function refuseUnservable(
  ex: Exchange,
  model: string,
  tally: UnservableTally,
  attempts: number,
  logger: Logger,
): number {
  const first = tally.first!;
  // Named as the client wrote it: an Anthropic client sent `stop_sequences`, not Chat's `stop`.
  const renames = ex.dialect.params;
  const u = renames
    ? { param: renameParams(first.param, renames), message: renameParams(first.message, renames) }
    : first;
  const message = unservableMessage(model, u, attempts);
  logger.info({ code: 'LLMGW_BAD_REQUEST', model, param: u.param, request: ex.id }, message);
  ex.trace.failure = { code: 'LLMGW_BAD_REQUEST', message };
  writeErrorBody(ex.res, 400, ex.dialect.errorBody(400, 'LLMGW_BAD_REQUEST', message, u.param));
  return 400;
}
