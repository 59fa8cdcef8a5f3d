// The seed's two weights endpoints: listing is a read, deleting a separate
// verb, so a mistyped command cannot remove anything.
import type { FastifyInstance } from 'fastify';
import type { Store } from '../store/index.js';
import { actorOf } from '../http/index.js';
import { collect, type CollectDeps, orphansView } from './weights.js';

export interface WeightsApiOptions extends CollectDeps {
  store: Store | null;
}

export function registerWeightsApi(app: FastifyInstance, options: WeightsApiOptions): void {
  app.get<{ Querystring: { node?: string } }>('/api/v1/weights/orphans', async (request) =>
    orphansView(options.catalog, options.inventory, request.query.node || undefined),
  );
  app.post<{ Querystring: { node?: string } }>('/api/v1/weights/collect', async (request) => {
    const summary = await collect(options, request.query.node || undefined);
    await options.store?.appendAudit({
      actor: actorOf(request),
      action: 'weights.collect',
      target: request.query.node || '*',
      detail: {
        asked: summary.asked,
        removed: summary.removed,
        refused: summary.refused,
        unreachable: summary.unreachable,
        bytes_freed: summary.bytes_freed,
        nodes: summary.nodes.map((n) => ({ node: n.node, removed: n.removed.map((r) => r.path), refused: n.refused, unreachable: n.unreachable })),
      },
    });
    return summary;
  });
}
