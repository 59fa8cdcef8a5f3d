// Who did something, as the audit log records it, and how a request says
// who it is. Here rather than in the store because the actor is what a
// request proved: the listeners make it, and the store, the inventory and
// the keys only record it. This module imports nothing of llmgw, so every
// part can name an actor without depending on another part.
import type { FastifyRequest } from 'fastify';

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

/** The authenticated identity of each admin request, set by the admin guard (adminapi/auth.ts). */
const identities = new WeakMap<FastifyRequest, string>();

/** Records who a request proved to be: `admin-token`, `dashboard:<session hash prefix>`, `loopback-no-token`. */
export function setIdentity(request: FastifyRequest, identity: string): void {
  identities.set(request, identity);
}

/**
 * Who is acting, for the audit log: the identity the request proved (absent
 * = `unauthenticated`, which only a listener without the admin guard, such
 * as a unit test's, ever records), and X-Llmgw-Actor beside it as a label
 * the caller chose (printable, bounded; null when not sent).
 */
export function actorOf(request: FastifyRequest): AuditActor {
  const raw = request.headers['x-llmgw-actor'];
  const value = (Array.isArray(raw) ? raw[0] : raw)
    ?.replace(/[^\x20-\x7e]/g, '')
    .trim()
    .slice(0, 200);
  return { identity: identities.get(request) ?? 'unauthenticated', label: value || null };
}
