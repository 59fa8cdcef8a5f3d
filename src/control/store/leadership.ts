// Who leads each role (today: the reconciler) and what the leader leaves for
// the followers to show. The epoch acquired here is what the connection's
// leader fence checks, so a paused former leader cannot write replicas.
import type { StoreConnection } from './connection.js';

export interface Leadership {
  role: string;
  epoch: number;
  holder: string;
  acquiredAtMs: number;
}

/** The leader's notes for a role as stored: unvalidated JSON, the epoch that wrote them, and when (epoch ms). */
export interface StoredLeaderNotes {
  body: unknown;
  epoch: number;
  updatedAtMs: number;
}

export class LeadershipRepository {
  constructor(private readonly connection: StoreConnection) {}

  /**
   * Takes the next epoch of `role` for `holder`: the row is created at epoch 1
   * or its epoch incremented, in one transaction. Call only while holding the
   * role's lock (the advisory lock): the increment is what fences the previous
   * holder's writes, and it waits for any of them still in flight (they hold
   * the row FOR SHARE) to commit first.
   */
  async acquireEpoch(role: string, holder: string, nowMs: number): Promise<number> {
    return this.connection.db.transaction().execute(async (tx) => {
      const row = await tx
        .insertInto('leadership')
        .values({ name: role, epoch: 1, holder, acquired_at: nowMs })
        .onConflict((oc) =>
          oc
            .column('name')
            .doUpdateSet((eb) => ({ epoch: eb('leadership.epoch', '+', 1), holder, acquired_at: nowMs })),
        )
        .returning('epoch')
        .executeTakeFirstOrThrow();
      return Number(row.epoch);
    });
  }

  /** The role's current holder and epoch; undefined = nobody has ever led it. */
  async read(role: string): Promise<Leadership | undefined> {
    const row = await this.connection.db
      .selectFrom('leadership')
      .selectAll()
      .where('name', '=', role)
      .executeTakeFirst();
    return row
      ? { role: row.name, epoch: Number(row.epoch), holder: row.holder, acquiredAtMs: Number(row.acquired_at) }
      : undefined;
  }

  /** Replaces the leader's notes for `role` (unvalidated JSON; readers check what they need). */
  async saveNotes(role: string, body: unknown, epoch: number, nowMs: number): Promise<void> {
    const values = { body: JSON.stringify(body), epoch, updated_at: nowMs };
    await this.connection.db
      .insertInto('leader_notes')
      .values({ name: role, ...values })
      .onConflict((oc) => oc.column('name').doUpdateSet(values))
      .execute();
  }

  /** The leader's notes for `role`; undefined = none written yet. */
  async readNotes(role: string): Promise<StoredLeaderNotes | undefined> {
    const row = await this.connection.db
      .selectFrom('leader_notes')
      .selectAll()
      .where('name', '=', role)
      .executeTakeFirst();
    return row
      ? { body: JSON.parse(row.body) as unknown, epoch: Number(row.epoch), updatedAtMs: Number(row.updated_at) }
      : undefined;
  }
}
