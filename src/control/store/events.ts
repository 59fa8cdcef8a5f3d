// The events log operators read (`llmgw ctl events`): scaling decisions,
// joins, failures. Append-only and pruned to a size, never part of a
// transaction with anything else: losing one costs a line of history.
import type { StoreConnection } from './connection.js';

/** An event as the store keeps it; null = not about that (no model, no node, not a scaling decision). */
export interface EventRow {
  id: number;
  atMs: number;
  kind: string;
  model: string | null;
  node: string | null;
  replica: string | null;
  from: number | null;
  to: number | null;
  message: string;
}

export type EventInput = Omit<EventRow, 'id' | 'model' | 'node' | 'replica' | 'from' | 'to'> & {
  model?: string | null;
  node?: string | null;
  replica?: string | null;
  from?: number | null;
  to?: number | null;
};

/** An event as its row: absent fields are NULL. */
function eventRow(event: EventInput) {
  return {
    at: event.atMs,
    kind: event.kind,
    model: event.model ?? null,
    node: event.node ?? null,
    replica: event.replica ?? null,
    from_count: event.from ?? null,
    to_count: event.to ?? null,
    message: event.message,
  };
}

export class EventRepository {
  constructor(private readonly connection: StoreConnection) {}

  /** Appends one event; returns its id (ids grow with time, so newest first is id order). */
  async append(event: EventInput): Promise<number> {
    const row = await this.connection.db
      .insertInto('events')
      .values(eventRow(event))
      .returning('id')
      .executeTakeFirstOrThrow();
    return Number(row.id);
  }

  /**
   * Appends several events in one transaction, in order: events that come
   * together (a fleet joining at once) cost one commit, not one each.
   */
  async appendMany(events: readonly EventInput[]): Promise<void> {
    if (events.length === 0) return;
    await this.connection.db.transaction().execute(async (tx) => {
      // Chunks keep each statement's parameters well under SQLite's limit (32,766).
      for (let i = 0; i < events.length; i += 500) {
        await tx
          .insertInto('events')
          .values(events.slice(i, i + 500).map(eventRow))
          .execute();
      }
    });
  }

  /** Newest first. `limit` 0 or absent = 100; `afterId` = only events newer than that one (for --watch). */
  async list(options: { model?: string; node?: string; limit?: number; afterId?: number } = {}): Promise<EventRow[]> {
    let query = this.connection.db
      .selectFrom('events')
      .selectAll()
      .orderBy('id', 'desc')
      .limit(options.limit || 100);
    if (options.model) query = query.where('model', '=', options.model);
    if (options.node) query = query.where('node', '=', options.node);
    if (options.afterId !== undefined) query = query.where('id', '>', options.afterId);
    const rows = await query.execute();
    return rows.map((r) => ({
      id: Number(r.id),
      atMs: r.at,
      kind: r.kind,
      model: r.model,
      node: r.node,
      replica: r.replica,
      from: r.from_count,
      to: r.to_count,
      message: r.message,
    }));
  }

  /** Deletes all but the newest `keep` events; returns how many went. */
  async prune(keep: number): Promise<number> {
    const db = this.connection.db;
    const newest = await db
      .selectFrom('events')
      .select((eb) => eb.fn.max('id').as('max'))
      .executeTakeFirst();
    const max = newest?.max === null || newest?.max === undefined ? 0 : Number(newest.max);
    if (max <= keep) return 0;
    const result = await db
      .deleteFrom('events')
      .where('id', '<=', max - keep)
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}
