// GET /api/v1/nodes/{id}/disks: where this node's disk went. From the
// node's last report (its filesystems and the weights on them) and the
// catalog (which model wants each entry), each filesystem's used space is
// split into weights some model wants, cache entries none wants (orphans:
// `weights --collect` reclaims them), operator's model directories no model
// names, and the rest (files that are not llmgw's). A pure function over
// that snapshot, apart from the node view so the two can change apart.
import { posix } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { DiskUseView, DiskWeightsView, NodeDisksView } from '../../api/types.js';
import { LlmgwError } from '../../errors/index.js';
import { cacheNameOf, type DiskReport, type NodeReport, type WeightsReport } from '../../protocol/index.js';
import { formatBytes } from '../../units/index.js';
import type { Catalog } from '../catalog/index.js';
import type { Inventory } from '../inventory/index.js';
import { z } from 'zod';
import { needs, type ZodTypeProvider } from '../../http/index.js';

export function registerDisksApi(
  app: FastifyInstance,
  deps: { catalog: Pick<Catalog, 'models'>; inventory?: Pick<Inventory, 'get'> },
): void {
  app
    .withTypeProvider<ZodTypeProvider>()
    .get(
      '/api/v1/nodes/:id/disks',
      { ...needs('fleet.read'), schema: { params: z.object({ id: z.string() }) } },
      async (request): Promise<NodeDisksView> => {
        const node = deps.inventory?.get(request.params.id);
        if (!node)
          throw new LlmgwError(
            'LLMGW_NODE_NOT_FOUND',
            `no node "${request.params.id}"; llmgw ctl nodes lists the fleet`,
          );
        return nodeDisksView(node.id, node.report, deps.catalog.models());
      },
    );
}

/** A catalog model as this needs it: its name and weights source. */
export interface SourceOf {
  name: string;
  source: string;
}

/** Pure: one node's report (absent = none yet) and the catalog's models in, the disk answer out. */
export function nodeDisksView(
  nodeId: string,
  report: NodeReport | null | undefined,
  models: readonly SourceOf[],
): NodeDisksView {
  const byCacheName = new Map<string, string[]>();
  for (const m of models) {
    const name = cacheNameOf(m.source, { allowHttp: true });
    if (name) byCacheName.set(name, [...(byCacheName.get(name) ?? []), m.name]);
  }
  const wantedBy = (w: WeightsReport): string[] => {
    if (w.kind === 'cache') return w.cache_name ? (byCacheName.get(w.cache_name) ?? []) : [];
    return models
      .filter(
        (m) =>
          (w.source !== undefined && m.source === w.source) || pathOfFileSource(m.source) === posix.normalize(w.path),
      )
      .map((m) => m.name);
  };
  const disks: DiskUseView[] = (report?.disks ?? []).map((d) => ({
    mount_point: d.mount_point,
    ...(d.fs_type ? { fs_type: d.fs_type } : {}),
    shared: d.shared,
    ...(d.total_bytes === undefined ? {} : { total_bytes: d.total_bytes }),
    ...(d.free_bytes === undefined ? {} : { free_bytes: d.free_bytes }),
    ...(d.total_bytes !== undefined && d.free_bytes !== undefined
      ? { used_bytes: Math.max(0, d.total_bytes - d.free_bytes) }
      : {}),
    paths: [...d.paths],
    weights: [],
    wanted_bytes: 0,
    orphan_bytes: 0,
    unused_model_dir_bytes: 0,
  }));
  const elsewhere: DiskWeightsView[] = [];
  for (const w of report?.weights ?? []) {
    const models = wantedBy(w);
    const view: DiskWeightsView = {
      path: w.path,
      ...(w.size_bytes === undefined ? {} : { size_bytes: w.size_bytes }),
      kind: w.kind,
      ...(w.source ? { source: w.source } : {}),
      models,
      ...(w.last_used_ms === undefined ? {} : { last_used: new Date(w.last_used_ms).toISOString() }),
    };
    const i = diskOf(report?.disks ?? [], w.path);
    const disk = i === -1 ? undefined : disks[i];
    if (!disk) {
      elsewhere.push(view);
      continue;
    }
    disk.weights.push(view);
    const size = w.size_bytes ?? 0;
    if (models.length) disk.wanted_bytes += size;
    else if (w.kind === 'cache') disk.orphan_bytes += size;
    else disk.unused_model_dir_bytes += size;
  }
  for (const d of disks) {
    d.weights.sort((a, b) => (b.size_bytes ?? 0) - (a.size_bytes ?? 0) || a.path.localeCompare(b.path));
    if (d.used_bytes !== undefined)
      d.other_bytes = Math.max(0, d.used_bytes - d.wanted_bytes - d.orphan_bytes - d.unused_model_dir_bytes);
  }
  return { node: nodeId, disks, elsewhere, summary: summaryOf(report, disks, elsewhere) };
}

/**
 * The filesystem a path lives on: the one the agent said holds the agent
 * directory above it (the probe knows mounts better than a prefix does),
 * else the longest mount point above it; -1 = none.
 */
function diskOf(disks: readonly DiskReport[], path: string): number {
  const p = posix.normalize(path);
  const longest = (lengthOf: (d: DiskReport) => number): number => {
    let best = -1;
    let bestLength = -1;
    disks.forEach((d, i) => {
      const n = lengthOf(d);
      if (n > bestLength) {
        best = i;
        bestLength = n;
      }
    });
    return best;
  };
  const byAgentDir = longest((d) => Math.max(-1, ...d.paths.filter((dir) => under(dir, p)).map((dir) => dir.length)));
  return byAgentDir !== -1 ? byAgentDir : longest((d) => (under(d.mount_point, p) ? d.mount_point.length : -1));
}

function under(dir: string, path: string): boolean {
  const d = posix.normalize(dir).replace(/\/+$/, '');
  return d === '' || path === d || path.startsWith(`${d}/`);
}

function pathOfFileSource(source: string): string | undefined {
  return source.startsWith('file://') ? posix.normalize(decodeURIComponent(source.slice('file://'.length))) : undefined;
}

function summaryOf(
  report: NodeReport | null | undefined,
  disks: readonly DiskUseView[],
  elsewhere: readonly DiskWeightsView[],
): string[] {
  if (!report) return ['the node has not reported yet, so its disks are unknown'];
  if (!report.disks)
    return [
      'the node did not report its filesystems (an older agent, or the probe failed), so only its weights are known',
    ];
  const lines: string[] = [];
  const b = (n: number | undefined) => (n === undefined ? 'unknown' : formatBytes(n, { threeFigures: true }));
  for (const d of disks) {
    const parts: string[] = [];
    const byModel = new Map<string, number>();
    for (const w of d.weights) for (const m of w.models) byModel.set(m, (byModel.get(m) ?? 0) + (w.size_bytes ?? 0));
    for (const [m, n] of [...byModel].sort((x, y) => y[1] - x[1])) parts.push(`${b(n)} weights of ${m}`);
    const orphans = d.weights.filter((w) => w.kind === 'cache' && w.models.length === 0);
    if (orphans.length)
      parts.push(
        `${b(d.orphan_bytes)} in ${orphans.length} cache entr${orphans.length === 1 ? 'y' : 'ies'} no model wants (llmgw ctl weights --collect reclaims them)`,
      );
    if (d.unused_model_dir_bytes)
      parts.push(
        `${b(d.unused_model_dir_bytes)} in model directories no model names (the operator's; never deleted by llmgw)`,
      );
    if (d.other_bytes !== undefined) parts.push(`${b(d.other_bytes)} of other files (not weights llmgw knows of)`);
    const used =
      d.used_bytes === undefined
        ? 'use unknown'
        : `${b(d.used_bytes)} used of ${b(d.total_bytes)} (${b(d.free_bytes)} free)`;
    lines.push(`${d.mount_point}${d.shared ? ' (shared)' : ''}: ${used}${parts.length ? `: ${parts.join(', ')}` : ''}`);
  }
  if (elsewhere.length)
    lines.push(
      `${elsewhere.length} weights entr${elsewhere.length === 1 ? 'y is' : 'ies are'} on no filesystem the agent reported`,
    );
  return lines;
}
