// Reclaiming weights: the control plane's half. The wanted set is a
// calculation, not a heuristic: the cache name of every model's source in the
// catalog. An orphan is a cache entry a node reports whose name is not in it.
// Only entries the agent itself wrote (kind "cache", a cache name, directly
// under the cache directory) can ever be orphans: anything an operator put on
// a disk is none of llmgw's business, however unreferenced it looks.
// Deleting is a separate verb, computed afresh at that moment, and each node
// decides for itself: the summary says "asked to remove", because a node that
// refuses a path it cannot prove it fetched is working, not failing.
import { posix } from 'node:path';
import { request } from 'undici';
import { CACHE_NAME_RE, cacheNameOf } from '../../protocol/index.js';
import type { CollectSummary, NodeCollectSummary, NodeOrphans, OrphanEntry, OrphansView } from '../../api/types.js';
import { agentDispatcher, certificateProblem, type PeerClient } from '../../tls/index.js';
import type { Catalog } from '../catalog/index.js';
import type { Inventory, Node } from '../inventory/index.js';
import { usableMgmtAddr } from '../agentapi/report-checks.js';

/** The cache names of every model in the catalog, file and store alike; a model at zero replicas is still wanted. */
export function wantedSet(catalog: Pick<Catalog, 'models'>): Set<string> {
  const wanted = new Set<string>();
  for (const m of catalog.models()) {
    const name = cacheNameOf(m.source, { allowHttp: true });
    if (name) wanted.add(name);
  }
  return wanted;
}

/** Cache entries of one node that no model wants. Pure: the node's last report and the wanted set. */
export function orphansOf(node: Pick<Node, 'id' | 'report'>, wanted: ReadonlySet<string>): NodeOrphans {
  const report = node.report;
  const cacheDir = report?.cache_dir;
  const entries: OrphanEntry[] = [];
  for (const w of report?.weights ?? []) {
    if (w.kind !== 'cache' || !w.cache_name || !CACHE_NAME_RE.test(w.cache_name)) continue;
    // Only a direct child of the reported cache directory, named by its cache name, is llmgw's own.
    if (!cacheDir || posix.normalize(w.path) !== posix.join(cacheDir, w.cache_name)) continue;
    if (wanted.has(w.cache_name)) continue;
    entries.push({
      path: w.path,
      cache_name: w.cache_name,
      ...(w.size_bytes !== undefined ? { size_bytes: w.size_bytes } : {}),
      ...(w.source ? { source: w.source } : {}),
      ...(w.last_used_ms !== undefined ? { last_used_ms: w.last_used_ms } : {}),
    });
  }
  entries.sort((a, b) => a.path.localeCompare(b.path));
  return { node: node.id, entries, reclaimable_bytes: entries.reduce((s, e) => s + (e.size_bytes ?? 0), 0) };
}

export function orphansView(
  catalog: Pick<Catalog, 'models'>,
  inventory: Pick<Inventory, 'list'>,
  nodeFilter?: string,
): OrphansView {
  const wanted = wantedSet(catalog);
  const nodes = inventory
    .list()
    .filter((n) => !nodeFilter || n.id === nodeFilter)
    .map((n) => orphansOf(n, wanted))
    .filter((n) => n.entries.length > 0);
  return { nodes, total_bytes: nodes.reduce((s, n) => s + n.reclaimable_bytes, 0) };
}

export interface CollectDeps {
  catalog: Pick<Catalog, 'models'>;
  inventory: Pick<Inventory, 'list' | 'get'>;
  /** How long one node may take to answer, ms. */
  timeoutMs?: number;
  /** How agents' management APIs are called (https with agent_ca); absent = plain http. */
  agentMgmt?: PeerClient;
  /** Why the control plane refused the management address a node reported; undefined = it did not. Absent = never says. */
  mgmtRefusal?: (nodeId: string) => string | undefined;
}

/**
 * Asks each node to remove its orphans, computed now, never taken from the
 * caller. The wanted set is computed again just before each node is asked, so
 * a model added while collect runs keeps its weights.
 */
export async function collect(deps: CollectDeps, nodeFilter?: string): Promise<CollectSummary> {
  const summaries: NodeCollectSummary[] = [];
  for (const node of deps.inventory.list()) {
    if (nodeFilter && node.id !== nodeFilter) continue;
    const { entries } = orphansOf(node, wantedSet(deps.catalog));
    if (entries.length === 0) continue;
    const summary: NodeCollectSummary = {
      node: node.id,
      asked: entries,
      asked_bytes: entries.reduce((s, e) => s + (e.size_bytes ?? 0), 0),
      removed: [],
      refused: [],
    };
    summaries.push(summary);
    const refusal = deps.mgmtRefusal?.(node.id);
    if (refusal !== undefined) {
      summary.unreachable = `the control plane refused the node's ${refusal}, so it is not called; fix the agent's --mgmt-addr`;
      continue;
    }
    if (!node.mgmtAddr || !usableMgmtAddr(node.mgmtAddr)) {
      summary.unreachable = 'the node reported no management address';
      continue;
    }
    try {
      const res = await request(`${deps.agentMgmt?.scheme ?? 'http'}://${node.mgmtAddr}/mgmt/v1/weights/remove`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${node.mgmtToken}` },
        body: JSON.stringify({ paths: entries.map((e) => e.path) }),
        headersTimeout: deps.timeoutMs ?? 60_000,
        bodyTimeout: deps.timeoutMs ?? 60_000,
        ...agentDispatcher(deps.agentMgmt, node.id),
      });
      const text = await res.body.text();
      if (res.statusCode !== 200) {
        summary.unreachable = `the node answered ${res.statusCode}: ${text.slice(0, 200)}`;
        continue;
      }
      const answer = JSON.parse(text) as {
        results?: { path: string; removed: boolean; bytes_freed?: number; check?: string; reason?: string }[];
      };
      for (const r of answer.results ?? []) {
        if (r.removed) summary.removed.push({ path: r.path, bytes_freed: r.bytes_freed ?? 0 });
        else
          summary.refused.push({
            path: r.path,
            check: r.check ?? 'unknown',
            reason: r.reason ?? 'the node gave no reason',
          });
      }
    } catch (err) {
      summary.unreachable = `cannot reach the node at ${node.mgmtAddr}: ${certificateProblem(err, 'agent_ca') ?? (err as Error).message}`;
    }
  }
  return {
    nodes: summaries,
    asked: summaries.reduce((s, n) => s + n.asked.length, 0),
    removed: summaries.reduce((s, n) => s + n.removed.length, 0),
    refused: summaries.reduce((s, n) => s + n.refused.length, 0),
    unreachable: summaries.filter((n) => n.unreachable).length,
    bytes_freed: summaries.reduce((s, n) => s + n.removed.reduce((t, r) => t + r.bytes_freed, 0), 0),
  };
}

// The wire shapes are defined once, in the typed admin client (src/api).
export type { CollectSummary, NodeCollectSummary, NodeOrphans, OrphanEntry, OrphansView };
