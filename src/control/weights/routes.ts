// The seed's two weights endpoints: listing is a read, deleting a separate
// verb, so a mistyped command cannot remove anything.
import type { FastifyInstance } from 'fastify';
import type { CollectSummary, OrphansView } from '../../api/types.js';
import type { AuditActor, Store } from '../store/index.js';
import { z } from 'zod';
import { actorOf, needs, type ZodTypeProvider } from '../../http/index.js';
import { collect, type CollectDeps, orphansView } from './weights.js';
import { COLLECT_ACTION, readLastCollects } from './last-collect.js';

export interface WeightsApiOptions extends CollectDeps {
  store: Store | null;
}

/** `?node=`: one node's weights; absent or empty = every node's. */
const NodeQuery = z.object({ node: z.string().optional() });

export function registerWeightsApi(fastify: FastifyInstance, options: WeightsApiOptions): void {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  app.get('/api/v1/weights/orphans', { ...needs('fleet.read'), schema: { querystring: NodeQuery } }, async (request) =>
    orphansWithLastCollect(options, request.query.node || undefined),
  );
  app.post(
    '/api/v1/weights/collect',
    { ...needs('weights.collect'), schema: { querystring: NodeQuery } },
    async (request) => collectAndAudit(options, request.query.node || undefined, actorOf(request)),
  );
}

/**
 * Collect with its audit record: the one path the API and the dashboard
 * share, so a collect from either reads the same in the audit log.
 * `nodeFilter` absent = every node.
 */
export async function collectAndAudit(
  options: WeightsApiOptions,
  nodeFilter: string | undefined,
  actor: string | AuditActor,
): Promise<CollectSummary> {
  const summary = await collect(options, nodeFilter);
  await options.store?.audit.append({
    actor,
    action: COLLECT_ACTION,
    target: nodeFilter || '*',
    detail: {
      asked: summary.asked,
      removed: summary.removed,
      refused: summary.refused,
      unreachable: summary.unreachable,
      bytes_freed: summary.bytes_freed,
      nodes: summary.nodes.map((n) => ({
        node: n.node,
        removed: n.removed.map((r) => r.path),
        refused: n.refused,
        unreachable: n.unreachable,
      })),
    },
  });
  return summary;
}

/** The orphans, and what each node did the last time collect asked it: the one read the API and the dashboard share. */
export async function orphansWithLastCollect(
  options: WeightsApiOptions,
  nodeFilter: string | undefined,
): Promise<OrphansView> {
  const view = orphansView(options.catalog, options.inventory, nodeFilter);
  const last = await readLastCollects(options.store, nodeFilter);
  return last ? { ...view, last_collect: last } : view;
}
