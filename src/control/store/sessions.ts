// Dashboard sessions in the store: what lets a login on one control plane
// hold on the others and across a restart. Kept here because it is the
// store's SQL; the rules (expiry, the hash, what happens while the store is
// away) are the dashboard's, in src/control/dashboard/session.ts. The
// SessionBackend interface is defined here and the dashboard imports it, so
// the store depends on no part above it.
import type { StoreConnection } from './connection.js';

/** A session where every control plane reads it: the id only as its HMAC-SHA256 under the admin token (hex). */
export interface StoredSession {
  readonly idHash: string;
  readonly csrfToken: string;
  readonly actor: string;
  readonly createdMs: number;
  readonly lastSeenMs: number;
  /** The person signed in; null = an admin-token login (no person). */
  readonly person?: string | null;
  /** Their role; absent or null = admin (an admin-token login, or a session from before people). */
  readonly role?: string | null;
  /** A team-admin's teams; absent = none. */
  readonly teams?: readonly string[];
}

/** Where sessions are shared (the store). Every call may reject when the store is away. */
export interface SessionBackend {
  put(session: StoredSession): Promise<void>;
  get(idHash: string): Promise<StoredSession | null>;
  touch(idHash: string, lastSeenMs: number): Promise<void>;
  delete(idHash: string): Promise<void>;
  /** Deletes sessions last seen before `idleBeforeMs` or created before `createdBeforeMs`, then all but the newest `keep`. */
  prune(idleBeforeMs: number, createdBeforeMs: number, keep: number): Promise<void>;
}

export class StoredSessions implements SessionBackend {
  constructor(private readonly store: StoreConnection) {}

  async put(s: StoredSession): Promise<void> {
    await this.store.db
      .insertInto('dashboard_sessions')
      .values({
        id_hash: s.idHash,
        csrf_token: s.csrfToken,
        actor: s.actor,
        created_at: s.createdMs,
        last_seen: s.lastSeenMs,
        person: s.person ?? null,
        role: s.role ?? null,
        teams: s.teams && s.teams.length ? JSON.stringify(s.teams) : null,
      })
      .execute();
  }

  async get(idHash: string): Promise<StoredSession | null> {
    const row = await this.store.db
      .selectFrom('dashboard_sessions')
      .selectAll()
      .where('id_hash', '=', idHash)
      .executeTakeFirst();
    if (!row) return null;
    return {
      idHash: row.id_hash,
      csrfToken: row.csrf_token,
      actor: row.actor,
      createdMs: row.created_at,
      lastSeenMs: row.last_seen,
      person: row.person,
      role: row.role,
      teams: row.teams === null ? [] : (JSON.parse(row.teams) as string[]),
    };
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
    const newest = db
      .selectFrom('dashboard_sessions')
      .select('id_hash')
      .orderBy('created_at', 'desc')
      .orderBy('id_hash')
      .limit(Math.max(0, keep));
    await db.deleteFrom('dashboard_sessions').where('id_hash', 'not in', newest).execute();
  }
}
