// The admin API's routes under /api/v1, mounted on the admin listener: the
// seed's paths, verbs and JSON field names, exactly. Reading and changing are
// separate verbs so a mistyped command cannot remove anything.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { NodeStateWord } from '../../api/types.js';
import { LlmgwError } from '../../errors/index.js';
import type { Catalog, Model } from '../catalog/index.js';
import { actorOf, type RouteJsonWording, type ZodTypeProvider, needs } from '../../http/index.js';
import type { AuditActor } from '../store/index.js';
import type { AdminState } from '../inventory/index.js';
import { registerNodeIdentityRoutes } from './nodes.js';
import { isAllNodes, nextPageQuery, nodeViewPage, parseNodeQuery } from './node-query.js';
import { registerPlanAndLogs, type PlanAndLogsDeps } from './plan-and-logs.js';
import { registerWhyRoutes } from './why-routes.js';
import { explainView, modelViews, nodeViews, replicaViews, summaryView, type ViewSources } from './views.js';

const NODE_STATE_WORDS: ReadonlyMap<string, AdminState> = new Map<NodeStateWord, AdminState>([
  ['ready', 'ready'],
  ['uncordon', 'ready'],
  ['cordoned', 'cordoned'],
  ['cordon', 'cordoned'],
  ['draining', 'draining'],
  ['drain', 'draining'],
]);

/** The API route's body schema and the dashboard's form (through changeNodeState) refuse a word alike. */
const unknownState = (word: unknown) =>
  `unknown state ${JSON.stringify(word ?? null)} (want ready, cordoned or draining; uncordon, cordon and drain also work)`;

/** POST /api/v1/nodes/{id}/state. No body reads as {}, which names the words wanted. */
const NodeStateBodySchema = z
  .object({
    state: z.enum(['ready', 'uncordon', 'cordoned', 'cordon', 'draining', 'drain'] satisfies NodeStateWord[], {
      error: (issue) => unknownState(issue.input),
    }),
  })
  .prefault({} as { state: NodeStateWord });

const NodeIdParamsSchema = z.object({ id: z.string() });

/** POST /api/v1/models: the definition itself is the catalog's to check (src/control/catalog), as for a file's. */
const ModelBodySchema = z.looseObject(
  {},
  { error: 'the model definition must be a JSON object with at least name, source and profiles' },
);

/** `?force=true` and nothing else forces; any other value, or none, does not. */
const ForceQuerySchema = z.object({
  force: z
    .unknown()
    .optional()
    .transform((v) => v === 'true'),
});

/** The seed words a missing or empty ?model= as "model is required": a problem with the whole query, not a field sentence. */
const ExplainQuerySchema = z.object({ model: z.string().optional() }).transform((q, ctx) => {
  if (q.model) return { model: q.model };
  ctx.addIssue({ code: 'custom', message: 'model is required' });
  return z.NEVER;
});

export interface AdminApiOptions
  extends ViewSources, Pick<PlanAndLogsDeps, 'previewPlacement' | 'previewFit' | 'agentMgmt' | 'mgmtRefusal'> {
  catalog: Catalog;
  /** Why a model could never be placed on the known fleet (empty, every node ready), or null when it fits somewhere. */
  checkFit?: (model: Model) => string | null;
  /** Called after a node's admin state changed: the reconciler's Notify and the agent's wake-up. */
  onNodeState?: (nodeId: string) => void;
  /** Called after a model was added or removed: the reconciler's Notify. */
  onCatalogChange?: () => void;
}

/** The seed caps a model definition at 1 MiB. */
const MODEL_BODY_LIMIT_BYTES = 1 << 20;

/** Mounts the admin API; the admin guard (auth.ts), installed on `app` first, keeps every route behind the admin token. */
export function registerAdminApi(fastify: FastifyInstance, options: AdminApiOptions): void {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  app.get('/api/v1/summary', needs('fleet.read'), async () => summaryView(options));
  app.get('/api/v1/models', needs('fleet.read'), async () => modelViews(options));
  // Filters and pages ride in the query and the headers, so the body stays the seed's plain list (node-query.ts).
  app.get('/api/v1/nodes', needs('fleet.read'), async (request, reply) => {
    const params = new URLSearchParams(request.url.split('?')[1] ?? '');
    const query = parseNodeQuery(params);
    if (isAllNodes(query)) return nodeViews(options);
    const page = nodeViewPage(options, query);
    void reply.header('x-total-count', String(page.total));
    if (page.next !== null)
      void reply.header('link', `</api/v1/nodes?${nextPageQuery(params, page.next)}>; rel="next"`);
    return page.nodes;
  });
  app.get(
    '/api/v1/replicas',
    { ...needs('fleet.read'), schema: { querystring: z.object({ model: z.string().optional() }) } },
    async (request) => replicaViews(options, request.query.model || undefined),
  );
  app.get(
    '/api/v1/explain-placement',
    { ...needs('fleet.read'), schema: { querystring: ExplainQuerySchema } },
    async (request) => {
      const asked = request.query.model;
      const model = options.catalog.resolve(asked);
      if (!model) throw new LlmgwError('LLMGW_MODEL_NOT_FOUND', `model ${JSON.stringify(asked)} is not in the catalog`);
      return explainView(options, model.name, asked);
    },
  );

  // Cordon, uncordon and drain are one operation with different targets:
  // cordon stops new placement, drain also moves existing work off.
  app.post(
    '/api/v1/nodes/:id/state',
    { ...needs('nodes.write'), schema: { params: NodeIdParamsSchema, body: NodeStateBodySchema } },
    async (request) => changeNodeState(options, request.params.id, request.body.state, actorOf(request)),
  );

  registerNodeIdentityRoutes(app, options);
  registerWhyRoutes(app, options);

  const modelWording: RouteJsonWording = { invalidJson: 'the model definition is not valid JSON' };
  const modelRoute = {
    bodyLimit: MODEL_BODY_LIMIT_BYTES,
    ...needs('models.write', modelWording),
    schema: { body: ModelBodySchema, querystring: ForceQuerySchema },
  };
  app.post('/api/v1/models', modelRoute, async (request, reply) => {
    if (!options.catalog.writable) {
      throw new LlmgwError(
        'LLMGW_NO_STORE',
        'this control plane has no store, so a model added here would not survive a restart',
      );
    }
    // A model no known node could ever hold is almost always a typo in a
    // class, pool or size; ?force=true is for a fleet that is still joining.
    if (!request.query.force && options.checkFit) {
      const why = options.checkFit(options.catalog.validate(request.body));
      if (why) {
        throw new LlmgwError(
          'LLMGW_PLACEMENT_NO_FIT',
          `no known node could ever run this model, so it was not added (add ?force=true to add it anyway, e.g. while the fleet is still joining):\n${why}`,
        );
      }
    }
    const model = await options.catalog.add(request.body, actorOf(request));
    options.onCatalogChange?.();
    return reply.code(200).send({ added: model.name });
  });

  registerPlanAndLogs(app, options);

  app.delete(
    '/api/v1/models/:name',
    { ...needs('models.write'), schema: { params: z.object({ name: z.string() }) } },
    async (request) => {
      if (!options.catalog.writable) throw new LlmgwError('LLMGW_NO_STORE', 'this control plane has no store');
      await options.catalog.remove(request.params.name, actorOf(request));
      options.onCatalogChange?.();
      return { removed: request.params.name };
    },
  );
}

/**
 * Cordon, uncordon or drain one node: the one path the API and the dashboard
 * share, so both write the same audit record and wake the reconciler alike.
 * `word` is what the caller sent: any of NodeStateWord.
 */
export async function changeNodeState(
  options: Pick<AdminApiOptions, 'inventory' | 'onNodeState'>,
  nodeId: string,
  word: unknown,
  actor: string | AuditActor,
): Promise<{ id: string; state: AdminState }> {
  const wanted = typeof word === 'string' ? NODE_STATE_WORDS.get(word) : undefined;
  if (!wanted) {
    throw new LlmgwError('LLMGW_NODE_STATE_INVALID', unknownState(word));
  }
  if (!options.inventory) throw new LlmgwError('LLMGW_NODE_NOT_FOUND', `no node "${nodeId}"`);
  const node = await options.inventory.setState(nodeId, wanted, actor);
  // Act now rather than at the next tick: an operator draining a node is usually about to do something to it.
  options.onNodeState?.(node.id);
  return { id: node.id, state: node.adminState };
}
