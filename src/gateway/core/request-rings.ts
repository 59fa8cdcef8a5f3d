// The two rings the request log (request-log.ts) keeps its records in: one
// for the requests the router took (answered or failed), and one apart for
// the requests a limit refused without an attempt (a rate limit, a budget, a
// full queue). Apart because a key hammering past its limit makes a refusal
// per request: in one shared ring they pushed every answered request out,
// and "which replica served this, why did it fail" had nothing to answer
// from. In their own ring, refusals of one key and reason are bounded too,
// so that key cannot push out the refusals of others either, and "why was
// this request refused" still finds a recent one by id. Both rings number
// each record as it comes (`seq`), so the log lists them merged, newest first.
import type { ErrorCode } from '../../errors/index.js';
import type { RequestRecord } from './request-log.js';

/** How many refusals the log keeps apart by default, whatever their key: ~1k records of a few hundred bytes. */
export const REFUSAL_LOG_CAPACITY = 1_000;

/**
 * How many refusals of one key and reason are kept by default: the latest
 * ones of a key hammering past its limit, enough to find the one a client
 * quotes from the last seconds, few enough that it does not crowd out
 * others' refusals.
 */
export const REFUSALS_PER_KEY_AND_REASON = 50;

/** A record in a ring, with its number in the log's order of arrival. */
export interface Held {
  readonly record: RequestRecord;
  readonly seq: number;
}

/** The codes of the refusals made before any attempt that a client repeating itself can multiply. */
const REFUSAL_CODES: ReadonlySet<string> = new Set<ErrorCode>([
  'LLMGW_RATE_LIMITED',
  'LLMGW_BUDGET_EXCEEDED',
  'LLMGW_REQUEST_OVER_TOKEN_LIMIT',
  'LLMGW_QUEUE_FULL',
  'LLMGW_QUEUE_TIMEOUT',
  'LLMGW_REMOTE_BUSY',
]);

/** True for a request a limit refused before any attempt: kept in the refusals' ring. */
export function isLimitRefusal(r: RequestRecord): boolean {
  if (r.attempts.length > 0 || r.failure === undefined) return false;
  return r.admission?.outcome === 'limited' || REFUSAL_CODES.has(r.failure.code);
}

/** The key and reason a refusal is bounded by: its API key's prefix (or none), its code and the limit it names. */
export function refusalGroup(r: RequestRecord): string {
  return `${r.key ?? ''}\u0000${r.failure?.code ?? ''}\u0000${r.admission?.limit ?? ''}`;
}

/** The ring of requests the router took: fixed capacity, oldest evicted first, found by id. */
export class RecordRing {
  private readonly ring: (Held | undefined)[];
  private next = 0;
  private count = 0;
  /**
   * The records in the ring by id, oldest first. Several, not one: the id
   * is the client's x-request-id when it sends one, and a client may send
   * the same one twice (a retry, a fixed header), by mistake or to hide
   * another request behind its own.
   */
  private readonly byId = new Map<string, Held[]>();

  constructor(capacity: number) {
    this.ring = new Array<Held | undefined>(capacity);
  }

  get capacity(): number {
    return this.ring.length;
  }

  get size(): number {
    return this.count;
  }

  add(held: Held): void {
    const old = this.ring[this.next];
    // The ring evicts oldest first, so the evicted record is the first of those with its id.
    if (old) forget(this.byId, old, true);
    this.ring[this.next] = held;
    remember(this.byId, held);
    this.next = (this.next + 1) % this.ring.length;
    if (this.count < this.ring.length) this.count++;
  }

  /** The newest record with this id; undefined = none. */
  newest(id: string): Held | undefined {
    return this.byId.get(id)?.at(-1);
  }

  countWithId(id: string): number {
    return this.byId.get(id)?.length ?? 0;
  }

  *newestFirst(): Generator<Held> {
    for (let k = 1; k <= this.count; k++) yield this.ring[(this.next - k + this.ring.length) % this.ring.length]!;
  }
}

/**
 * The ring of refusals: at most `capacity` in all and `perGroup` of one key
 * and reason (refusalGroup). A refusal past its group's bound evicts the
 * oldest of that group, so a key hammering a limit evicts only its own; one
 * past the total evicts the oldest of all.
 */
export class RefusalRing {
  /** Every record held, oldest first (a Set keeps the order of insertion, and deletes in O(1)). */
  private readonly order = new Set<Held>();
  /** Each group's records, oldest first. */
  private readonly groups = new Map<string, Held[]>();
  private readonly byId = new Map<string, Held[]>();

  constructor(
    readonly capacity: number,
    private readonly perGroup: number,
  ) {}

  get size(): number {
    return this.order.size;
  }

  add(held: Held): void {
    const group = refusalGroup(held.record);
    const same = this.groups.get(group);
    if (same && same.length >= this.perGroup) this.drop(same[0]!);
    else if (this.order.size >= this.capacity) this.drop(this.order.values().next().value!);
    this.order.add(held);
    if (same) same.push(held);
    else this.groups.set(group, [held]);
    remember(this.byId, held);
  }

  newest(id: string): Held | undefined {
    return this.byId.get(id)?.at(-1);
  }

  countWithId(id: string): number {
    return this.byId.get(id)?.length ?? 0;
  }

  *newestFirst(): Generator<Held> {
    const all = [...this.order];
    for (let i = all.length - 1; i >= 0; i--) yield all[i]!;
  }

  /** Forgets `held`, the oldest of its group (each group is evicted oldest first, and so is the whole). */
  private drop(held: Held): void {
    this.order.delete(held);
    const group = refusalGroup(held.record);
    const same = this.groups.get(group);
    if (same?.[0] === held) same.shift();
    if (same?.length === 0) this.groups.delete(group);
    // Not always the oldest of its id: records of one id may sit in several groups.
    forget(this.byId, held, false);
  }
}

function remember(byId: Map<string, Held[]>, held: Held): void {
  const same = byId.get(held.record.id);
  if (same) same.push(held);
  else byId.set(held.record.id, [held]);
}

/** Removes `held` from its id's list; `oldest`: it is known to be the first there. */
function forget(byId: Map<string, Held[]>, held: Held, oldest: boolean): void {
  const same = byId.get(held.record.id);
  if (!same) return;
  if (oldest) {
    if (same[0] === held) same.shift();
  } else {
    const i = same.indexOf(held);
    if (i >= 0) same.splice(i, 1);
  }
  if (same.length === 0) byId.delete(held.record.id);
}

/** Both rings' records merged newest first (by seq). */
export function* newestOfBoth(a: Iterable<Held>, b: Iterable<Held>): Generator<RequestRecord> {
  const ia = a[Symbol.iterator]();
  const ib = b[Symbol.iterator]();
  let x = ia.next();
  let y = ib.next();
  while (!x.done || !y.done) {
    if (y.done || (!x.done && x.value.seq > y.value.seq)) {
      yield x.value!.record;
      x = ia.next();
    } else {
      yield y.value.record;
      y = ib.next();
    }
  }
}
