// What each node did the last time collect asked it: removed, refused and
// why, or could not be asked. Read back from the audit log, where every
// collect already writes its summary, rather than kept in memory: the answer
// then survives a restart and is the same on every control plane sharing
// one store. Apart from weights.ts because that computes what collect will
// ask; this reports what the nodes answered.
import type { NodeLastCollectView } from '../../api/types.js';
import type { AuditEntry, Store } from '../store/index.js';

/** The collect audit action (routes.ts writes it). */
export const COLLECT_ACTION = 'weights.collect';
/** How far back in the audit log to look for collects; older ones are not shown. */
const AUDIT_LOOKBACK = 1000;

interface AuditedNode {
  node?: unknown;
  removed?: unknown;
  refused?: unknown;
  unreachable?: unknown;
}

/**
 * Per node, the newest collect entry that asked it anything, node id order.
 * Pure: `entries` newest first, as the audit log lists them; entries of other
 * actions and detail of an unexpected shape are skipped.
 */
export function lastCollects(entries: readonly AuditEntry[]): NodeLastCollectView[] {
  const out = new Map<string, NodeLastCollectView>();
  for (const e of entries) {
    if (e.action !== COLLECT_ACTION) continue;
    const nodes = Array.isArray(e.detail.nodes) ? (e.detail.nodes as unknown[]) : [];
    for (const item of nodes) {
      if (!item || typeof item !== 'object') continue;
      const n = item as AuditedNode;
      if (typeof n.node !== 'string' || out.has(n.node)) continue;
      const refused = Array.isArray(n.refused)
        ? (n.refused as unknown[]).filter(
            (r): r is { path?: unknown; check?: unknown; reason?: unknown } => !!r && typeof r === 'object',
          )
        : [];
      out.set(n.node, {
        node: n.node,
        at: new Date(e.at).toISOString(),
        actor: e.actorLabel && e.actorLabel !== e.actor ? `${e.actor} (${e.actorLabel})` : e.actor,
        removed: Array.isArray(n.removed) ? n.removed.filter((p): p is string => typeof p === 'string') : [],
        refused: refused.map((r) => ({
          path: String(r.path ?? ''),
          check: String(r.check ?? 'unknown'),
          reason: String(r.reason ?? 'the node gave no reason'),
        })),
        ...(typeof n.unreachable === 'string' ? { unreachable: n.unreachable } : {}),
      });
    }
  }
  return [...out.values()].sort((a, b) => a.node.localeCompare(b.node));
}

/** Undefined when the control plane keeps no audit log (no store). */
export async function readLastCollects(
  store: Store | null,
  nodeFilter?: string,
): Promise<NodeLastCollectView[] | undefined> {
  if (!store) return undefined;
  // Only collects: read unfiltered, a thousand joins or cordons since would push the last collect out of the window.
  const all = lastCollects(await store.audit.list({ limit: AUDIT_LOOKBACK, action: COLLECT_ACTION }));
  return nodeFilter ? all.filter((n) => n.node === nodeFilter) : all;
}
