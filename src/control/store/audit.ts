// The audit log: who changed what, one row per admin action (and per node
// join). Other repositories write their audit row inside their own
// transaction through insertAudit, so a change never lands without it.
import { sql } from 'kysely';
import type { Queryable, StoreConnection } from './connection.js';
import { type AuditActor, auditActor } from '../../http/actor.js';

export interface AuditEntry {
  id: number;
  at: number;
  /** The authenticated identity (see AuditLogTable.actor). */
  actor: string;
  /** What the caller called itself; null = nothing. */
  actorLabel: string | null;
  action: string;
  target: string;
  detail: Record<string, unknown>;
}

export interface AuditInput {
  /** The authenticated identity, or a whole AuditActor (identity and label). */
  actor: string | AuditActor;
  action: string;
  target: string;
  detail?: Record<string, unknown>;
}

export class AuditRepository {
  constructor(private readonly connection: StoreConnection) {}

  async append(entry: AuditInput): Promise<void> {
    await insertAudit(this.connection.db, this.connection.now(), entry);
  }

  /**
   * Newest first; `limit` 0 or absent = 100. `sinceMs` (epoch ms, inclusive),
   * `actor` (the identity or the label, exactly), `action` (exactly, or a
   * prefix ending in a dot: `node.`) and `target` narrow it; absent = any.
   */
  async list(
    options: { limit?: number; target?: string; sinceMs?: number; actor?: string; action?: string } = {},
  ): Promise<AuditEntry[]> {
    let query = this.connection.db
      .selectFrom('audit_log')
      .selectAll()
      .orderBy('id', 'desc')
      .limit(options.limit || 100);
    if (options.target) query = query.where('target', '=', options.target);
    if (options.sinceMs !== undefined) query = query.where('at', '>=', options.sinceMs);
    const actor = options.actor;
    if (actor) query = query.where((eb) => eb.or([eb('actor', '=', actor), eb('actor_label', '=', actor)]));
    const action = options.action;
    if (action)
      query = action.endsWith('.')
        ? query.where(sql<boolean>`action like ${`${action.replace(/[!%_]/g, '!$&')}%`} escape '!'`)
        : query.where('action', '=', action);
    const rows = await query.execute();
    return rows.map(({ actor_label, ...r }) => ({
      ...r,
      actorLabel: actor_label ?? null,
      id: Number(r.id),
      detail: JSON.parse(r.detail) as Record<string, unknown>,
    }));
  }
}

/** Writes one audit row at `at` (epoch ms) on `db`: pass the transaction of the change it records. */
export async function insertAudit(db: Queryable, at: number, entry: AuditInput): Promise<void> {
  const who = auditActor(entry.actor);
  await db
    .insertInto('audit_log')
    .values({
      at,
      actor: who.identity,
      actor_label: who.label,
      action: entry.action,
      target: entry.target,
      detail: JSON.stringify(entry.detail ?? {}),
    })
    .execute();
}
