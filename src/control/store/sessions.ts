// Dashboard sessions in the store, behind the dashboard's SessionBackend:
// what lets a login on one control plane hold on the others and across a
// restart. Kept here, beside keys and usage, because it is the store's SQL;
// the rules (expiry, the hash, what happens while the store is away) are the
// dashboard's, in src/control/dashboard/session.ts.
import type { SessionBackend, StoredSession } from '../dashboard/session.js';
import type { Store } from './store.js';

export class StoredSessions implements SessionBackend {
  constructor(private readonly store: Store) {}

  async put(s: StoredSession): Promise<void> {
    await this.store.db
      .insertInto('dashboard_sessions')
      .values({ id_hash: s.idHash, csrf_token: s.csrfToken, actor: s.actor, created_at: s.createdMs, last_seen: s.lastSeenMs })
      .execute();
  }

  async get(idHash: string): Promise<StoredSession | null> {
    const row = await this.store.db.selectFrom('dashboard_sessions').selectAll().where('id_hash', '=', idHash).executeTakeFirst();
    if (!row) return null;
    return { idHash: row.id_hash, csrfToken: row.csrf_token, actor: row.actor, createdMs: row.created_at, lastSeenMs: row.last_seen };
  }

  async touch(idHash: string, lastSeenMs: number): Promise<void> {
    // Only forwards: two instances touching at once must not move it back.
    await this.store.db
      .updateTable('dashboard_sessions')
      .set({ last_seen: lastSeenMs })
      .where('id_hash', '=', idHash)
      .where('last_seen', '<', lastSeenMs)
      .execute();
  }

  async delete(idHash: string): Promise<void> {
    await this.store.db.deleteFrom('dashboard_sessions').where('id_hash', '=', idHash).execute();
  }

  async prune(idleBeforeMs: number, createdBeforeMs: number, keep: number): Promise<void> {
    const db = this.store.db;
    await db
      .deleteFrom('dashboard_sessions')
      .where((eb) => eb.or([eb('last_seen', '<', idleBeforeMs), eb('created_at', '<', createdBeforeMs)]))
      .execute();
    const newest = db.selectFrom('dashboard_sessions').select('id_hash').orderBy('created_at', 'desc').orderBy('id_hash').limit(Math.max(0, keep));
    await db.deleteFrom('dashboard_sessions').where('id_hash', 'not in', newest).execute();
  }
}
