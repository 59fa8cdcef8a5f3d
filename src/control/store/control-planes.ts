// Which control-plane instances share this store, and where each listens:
// every instance touches its row about once a second, and `GET
// /api/v1/control-planes` lists those seen lately.
import type { StoreConnection } from './connection.js';

export interface ControlPlaneRow {
  id: string;
  clientUrl: string | null;
  adminUrl: string | null;
  agentUrl: string | null;
  startedAtMs: number;
  lastSeenMs: number;
}

export class ControlPlaneRepository {
  constructor(private readonly connection: StoreConnection) {}

  /** Records that an instance is alive (and where it listens); called about once a second by each. */
  async touch(row: ControlPlaneRow): Promise<void> {
    const values = {
      client_url: row.clientUrl,
      admin_url: row.adminUrl,
      agent_url: row.agentUrl,
      last_seen: row.lastSeenMs,
    };
    await this.connection.db
      .insertInto('control_planes')
      .values({ id: row.id, started_at: row.startedAtMs, ...values })
      .onConflict((oc) => oc.column('id').doUpdateSet(values))
      .execute();
  }

  /** Instances seen since `sinceMs` (0 = every one ever recorded), id order. */
  async list(sinceMs = 0): Promise<ControlPlaneRow[]> {
    const rows = await this.connection.db
      .selectFrom('control_planes')
      .selectAll()
      .where('last_seen', '>=', sinceMs)
      .orderBy('id')
      .execute();
    return rows.map((r) => ({
      id: r.id,
      clientUrl: r.client_url,
      adminUrl: r.admin_url,
      agentUrl: r.agent_url,
      startedAtMs: Number(r.started_at),
      lastSeenMs: Number(r.last_seen),
    }));
  }

  /** Forgets instances not seen since `beforeMs`, so the list does not grow with every restart. */
  async prune(beforeMs: number): Promise<void> {
    await this.connection.db.deleteFrom('control_planes').where('last_seen', '<', beforeMs).execute();
  }
}
