// Who did something, as the audit log records it. A module of its own, with
// no imports, so the router and the HTTP helpers can name an actor without
// loading the store's database drivers.

/** Who did something: the identity a request proved, and what it called itself (X-Llmgw-Actor; null = nothing). */
export interface AuditActor {
  readonly identity: string;
  readonly label: string | null;
}

/**
 * An actor as the audit log and created_by fields take it. A plain string is
 * an identity with no label: what the control plane's own parts (node
 * joins, tests) pass.
 */
export function auditActor(who: string | AuditActor): AuditActor {
  return typeof who === 'string' ? { identity: who, label: null } : who;
}

/** One line for a created_by field: `admin-token (alice@laptop)`, or the identity alone. */
export function actorText(who: string | AuditActor): string {
  const a = auditActor(who);
  return a.label === null || a.label === a.identity ? a.identity : `${a.identity} (${a.label})`;
}
