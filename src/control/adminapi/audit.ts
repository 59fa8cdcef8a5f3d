// GET /api/v1/audit: what changed and who did it. The store's audit log
// (store/audit.ts) records every admin write inside the write's own
// transaction; this turns its rows into the wire shape with a sentence per
// change, naming the before and after where the row has them. Apart from
// routes.ts because it reads the store, not the fleet, and because ctl and
// the dashboard's audit page both want the same words.
import type { FastifyInstance } from 'fastify';
import type { AuditEntryView, AuditView } from '../../api/types.js';
import { LlmgwError } from '../../errors/index.js';
import type { AuditEntry } from '../store/index.js';
import { z } from 'zod';
import { needs, type ZodTypeProvider } from '../../http/index.js';

/** What the audit route reads: the store's audit log. */
export interface AuditSource {
  list(options: {
    limit?: number;
    target?: string;
    sinceMs?: number;
    actor?: string;
    action?: string;
  }): Promise<AuditEntry[]>;
}

/** The audit query as the URL carries it: each a string, read by auditFilter (the dashboard's page reads it too). */
const AuditQuerySchema = z.object({
  since: z.string().optional(),
  actor: z.string().optional(),
  action: z.string().optional(),
  target: z.string().optional(),
  limit: z.string().optional(),
});
export type AuditQuery = z.output<typeof AuditQuerySchema>;

/** The most entries one answer carries. */
export const MAX_AUDIT_LIST = 1000;

/** Absent `audit`: no store, so nothing is recorded and the answer says so (`recorded: false`). */
export function registerAuditApi(app: FastifyInstance, deps: { audit?: AuditSource; now: () => number }): void {
  app
    .withTypeProvider<ZodTypeProvider>()
    .get(
      '/api/v1/audit',
      { ...needs('fleet.read'), schema: { querystring: AuditQuerySchema } },
      async (request): Promise<AuditView> => auditView(deps, request.query),
    );
}

/** The audit answer for a query as the URL carries it; the dashboard's audit page calls this too. */
export async function auditView(deps: { audit?: AuditSource; now: () => number }, q: AuditQuery): Promise<AuditView> {
  const filter = auditFilter(q, deps.now());
  if (!deps.audit) return { entries: [], recorded: false };
  const rows = await deps.audit.list(filter);
  return { entries: rows.map(auditEntryView), recorded: true };
}

/** The query checked: a bad value is a 400 that says what to write instead. */
export function auditFilter(
  q: AuditQuery,
  nowMs: number,
): { limit: number; sinceMs?: number; actor?: string; action?: string; target?: string } {
  let limit = 100;
  if (q.limit !== undefined && q.limit !== '') {
    const n = Number(q.limit);
    if (!/^\d+$/.test(q.limit) || n < 1 || n > MAX_AUDIT_LIST) {
      throw new LlmgwError(
        'LLMGW_BAD_REQUEST',
        `limit must be a whole number from 1 to ${MAX_AUDIT_LIST}; got ${JSON.stringify(q.limit)}`,
      );
    }
    limit = n;
  }
  const out: { limit: number; sinceMs?: number; actor?: string; action?: string; target?: string } = { limit };
  if (q.since) out.sinceMs = sinceMs(q.since, nowMs);
  if (q.actor) out.actor = q.actor;
  if (q.action) out.action = q.action;
  if (q.target) out.target = q.target;
  return out;
}

/** `since` as a duration back from now (90s, 30m, 12h, 7d) or an RFC 3339 time; epoch ms. */
export function sinceMs(text: string, nowMs: number): number {
  const m = /^(\d+)(s|m|h|d)$/.exec(text);
  if (m)
    return nowMs - Number(m[1]) * { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] as 's' | 'm' | 'h' | 'd'];
  const at = /^\d{4}-\d{2}-\d{2}(T|$)/.test(text) ? Date.parse(text) : NaN;
  if (Number.isNaN(at)) {
    throw new LlmgwError(
      'LLMGW_BAD_REQUEST',
      `since must be a duration back from now (90s, 30m, 12h, 7d) or a time (2026-12-04T10:00:00Z); got ${JSON.stringify(text)}`,
    );
  }
  return at;
}

export function auditEntryView(e: AuditEntry): AuditEntryView {
  return {
    id: e.id,
    at: new Date(e.at).toISOString(),
    actor: e.actor,
    ...(e.actorLabel === null ? {} : { actor_label: e.actorLabel }),
    action: e.action,
    target: e.target,
    summary: auditSummary(e),
    detail: e.detail,
  };
}

/** One sentence per change: what, to what, and from what where the record keeps it. An action this does not know reads as it is. */
export function auditSummary(e: Pick<AuditEntry, 'action' | 'target' | 'detail'>): string {
  const d = e.detail;
  const text = (v: unknown): string | undefined =>
    typeof v === 'string' || typeof v === 'number' ? String(v) : undefined;
  switch (e.action) {
    case 'model.add':
      return `added model ${e.target}${definitionNote(d.definition)}`;
    case 'model.remove':
      return `removed model ${e.target}${definitionNote(d.definition)}`;
    case 'node.state': {
      const to = text(d.to);
      const from = text(d.from);
      const verb =
        to === 'cordoned'
          ? 'cordoned'
          : to === 'draining'
            ? 'drained'
            : to === 'ready'
              ? 'made ready (uncordoned)'
              : `set to ${to ?? 'an unknown state'}`;
      return `${verb} node ${e.target}${from === undefined ? '' : ` (was ${from})`}`;
    }
    case 'node.approve':
      return `approved node ${e.target}${text(d.hardware) ? ` with ${text(d.hardware)}` : ''}${text(d.from) ? ` (was ${text(d.from)})` : ''}`;
    case 'node.remove':
      return `removed node ${e.target}`;
    case 'node.join':
      return `node ${e.target} joined`;
    case 'node.rejoin':
    case 'node.rejoin_with_node_token':
    case 'node.rejoin_after_lost':
      return `node ${e.target} joined again (${e.action.slice('node.'.length).replace(/_/g, ' ')})`;
    case 'join_token.create':
      return `made a join token for node ${e.target}${typeof d.expires_at === 'number' ? `, valid until ${new Date(d.expires_at).toISOString()}` : ''}`;
    case 'key.create':
      return `made API key ${e.target}${text(d.name) ? ` ("${text(d.name)}")` : ''}`;
    case 'key.revoke':
      return `revoked API key ${e.target}`;
    case 'weights.collect': {
      const freed = typeof d.bytes_freed === 'number' ? `, ${formatGiB(d.bytes_freed)} freed` : '';
      const where = e.target === '*' ? 'every node' : `node ${e.target}`;
      return `collected orphaned weights on ${where}: asked ${text(d.asked) ?? '?'}, removed ${text(d.removed) ?? '?'}, refused ${text(d.refused) ?? '?'}${freed}`;
    }
    default:
      return `${e.action} ${e.target}`;
  }
}

/** ", source hf://…, min 1" from a stored definition; empty when it has neither. */
function definitionNote(def: unknown): string {
  if (!def || typeof def !== 'object') return '';
  const d = def as { source?: unknown; scaling?: { min?: unknown; max?: unknown }; profiles?: unknown };
  const parts: string[] = [];
  if (typeof d.source === 'string') parts.push(`source ${d.source}`);
  if (Array.isArray(d.profiles)) parts.push(`${d.profiles.length} profile${d.profiles.length === 1 ? '' : 's'}`);
  if (typeof d.scaling?.min === 'number') parts.push(`min ${d.scaling.min}`);
  return parts.length ? ` (${parts.join(', ')})` : '';
}

function formatGiB(bytes: number): string {
  return bytes >= 2 ** 30
    ? `${(bytes / 2 ** 30).toFixed(1)} GiB`
    : bytes >= 2 ** 20
      ? `${(bytes / 2 ** 20).toFixed(1)} MiB`
      : `${bytes} bytes`;
}
