// Recording is fire-and-forget on purpose: the reconciler and the inventory
// record events in the middle of their own work, and a slow or absent store
// must never hold up a pass. Writes are queued in order; list() waits for
// the queue, so a reader sees every event recorded before it asked.
import type { Logger } from 'pino';
import type { EventRow, Store } from '../store/index.js';

export type EventKind =
  | 'scale'
  | 'node_joined'
  | 'node_state'
  | 'node_back'
  | 'node_stale'
  | 'node_lost'
  | 'node_pending'
  | 'node_approved'
  | 'node_hardware_changed'
  | 'node_removed'
  | 'drain'
  | 'replica_placed'
  | 'replica_ready'
  | 'replica_failed'
  | 'replica_lost'
  | 'placement_failed'
  | 'budget_alert';

export const EVENT_KINDS: readonly EventKind[] = [
  'scale',
  'node_joined',
  'node_state',
  'node_back',
  'node_stale',
  'node_lost',
  'node_pending',
  'node_approved',
  'node_hardware_changed',
  'node_removed',
  'drain',
  'replica_placed',
  'replica_ready',
  'replica_failed',
  'replica_lost',
  'placement_failed',
  'budget_alert',
];

/** One event. Null fields are not about that: no model (a node joining), no node, no counts (anything but `scale`). */
export interface FleetEvent {
  readonly id: number;
  /** Epoch ms. */
  readonly atMs: number;
  /** One of EventKind; an unknown kind (written by a newer control plane) is passed through as it is. */
  readonly kind: string;
  readonly model: string | null;
  readonly node: string | null;
  readonly replica: string | null;
  /** For `scale`: wanted replicas before and after. */
  readonly from: number | null;
  readonly to: number | null;
  readonly message: string;
}

export interface NewEvent {
  readonly kind: EventKind;
  readonly model?: string;
  readonly node?: string;
  readonly replica?: string;
  readonly from?: number;
  readonly to?: number;
  readonly message: string;
}

/** Where events are recorded; the Events class is one, tests pass a list. */
export interface EventSink {
  record(event: NewEvent): void;
}

export interface EventListOptions {
  /** Only this model's events; absent = all. */
  readonly model?: string;
  /** Only this node's events; absent = all. */
  readonly node?: string;
  /** How many, newest first; absent or 0 = 100; at most MAX_EVENT_LIST. */
  readonly limit?: number;
  /** Only events newer than this id (what --watch asks for); absent = from the newest. */
  readonly afterId?: number;
}

export interface EventsOptions {
  /** Null = memory only (`store: none`): the newest `keep` events, lost on restart. */
  readonly store: Store | null;
  /** Epoch ms. */
  readonly now: () => number;
  readonly logger: Logger;
  /** Events kept; older ones are pruned. Absent = 10 000. */
  readonly keep?: number;
}

export const DEFAULT_EVENTS_KEPT = 10_000;
export const MAX_EVENT_LIST = 1000;
/** Prune after this many appends, not after each: one DELETE per hundred events is plenty to stay bounded. */
const PRUNE_EVERY = 100;
/** An event with the time it was recorded, as it waits to be written. */
type NewEventAt = NewEvent & { atMs: number };

export class Events implements EventSink {
  private queue: Promise<void> = Promise.resolve();
  private readonly memory: FleetEvent[] = [];
  private nextMemoryId = 1;
  private appended = 0;
  /** Recorded and not yet handed to the store, oldest first; written together by the next queued write. */
  private unwritten: NewEventAt[] = [];
  private readonly keep: number;

  constructor(private readonly options: EventsOptions) {
    this.keep = Math.max(1, options.keep ?? DEFAULT_EVENTS_KEPT);
  }

  record(event: NewEvent): void {
    const atMs = this.options.now();
    const store = this.options.store;
    this.options.logger.info(
      {
        event: event.kind,
        model: event.model,
        node: event.node,
        replica: event.replica,
        from: event.from,
        to: event.to,
      },
      event.message,
    );
    if (!store) {
      this.memory.push(toFleetEvent({ ...event, id: this.nextMemoryId++, atMs }));
      if (this.memory.length > this.keep) this.memory.splice(0, this.memory.length - this.keep);
      return;
    }
    // Events recorded while a write is under way go together in the next one: a join storm of
    // 10,000 nodes is 10,000 events, and one commit (an fsync on SQLite) each held the loop up.
    this.unwritten.push({ atMs, ...event });
    if (this.unwritten.length > 1) return;
    this.queue = this.queue
      .then(async () => {
        const batch = this.unwritten;
        this.unwritten = [];
        try {
          await store.events.appendMany(batch);
        } catch (err) {
          this.options.logger.error(
            { err, events: batch.length, event: batch[0]?.kind },
            'events could not be written to the store; they are in this log only',
          );
          return;
        }
        const before = this.appended;
        this.appended += batch.length;
        if (Math.floor(this.appended / PRUNE_EVERY) > Math.floor(before / PRUNE_EVERY))
          await store.events.prune(this.keep);
      })
      .catch((err: unknown) => this.options.logger.error({ err }, 'old events could not be pruned from the store'));
  }

  /** Newest first. What the admin API's GET /api/v1/events serves, and what the dashboard calls in process. */
  async list(options: EventListOptions = {}): Promise<FleetEvent[]> {
    const limit = Math.min(MAX_EVENT_LIST, options.limit || 100);
    if (!this.options.store) {
      const out: FleetEvent[] = [];
      for (let i = this.memory.length - 1; i >= 0 && out.length < limit; i--) {
        const e = this.memory[i]!;
        if (options.afterId !== undefined && e.id <= options.afterId) break;
        if (options.model && e.model !== options.model) continue;
        if (options.node && e.node !== options.node) continue;
        out.push(e);
      }
      return out;
    }
    await this.queue;
    const rows = await this.options.store.events.list({
      ...(options.model ? { model: options.model } : {}),
      ...(options.node ? { node: options.node } : {}),
      limit,
      ...(options.afterId === undefined ? {} : { afterId: options.afterId }),
    });
    return rows.map(toFleetEvent);
  }

  /** Waits for the events recorded so far to be written (close, tests). */
  async flush(): Promise<void> {
    await this.queue;
  }
}

/**
 * The inventory's change notices (onChange's `why`) that are events: a node
 * joining or joining again, coming back after heartbeats stopped, an admin
 * state change. Null for the rest (a report whose capacity changed).
 */
export function nodeChangeEvent(nodeId: string, why: string): NewEvent | null {
  if (why === 'joined') return { kind: 'node_joined', node: nodeId, message: `node ${nodeId} joined` };
  if (why === 'rejoined')
    return {
      kind: 'node_joined',
      node: nodeId,
      message: `node ${nodeId} joined again (its agent restarted or re-registered)`,
    };
  const back = /^back \((\w+)\)$/.exec(why);
  if (back)
    return {
      kind: 'node_back',
      node: nodeId,
      message: `node ${nodeId} is sending heartbeats again (it was ${back[1]})`,
    };
  const state = /^state (\w+) -> (\w+)$/.exec(why);
  if (state) return { kind: 'node_state', node: nodeId, message: `node ${nodeId}: ${state[1]} → ${state[2]}` };
  return null;
}

function toFleetEvent(e: EventRow | (NewEvent & { id: number; atMs: number })): FleetEvent {
  return {
    id: e.id,
    atMs: e.atMs,
    kind: e.kind,
    model: e.model ?? null,
    node: e.node ?? null,
    replica: e.replica ?? null,
    from: e.from ?? null,
    to: e.to ?? null,
    message: e.message,
  };
}
