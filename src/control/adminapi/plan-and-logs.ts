// Two admin endpoints that answer from what the control plane can work out
// but does not keep: a placement plan for models not yet added (ctl's
// `models add --dry-run`, like `nomad job plan`), and an engine's log, which
// lives on the node that runs the shard and is fetched from its agent's
// management API when asked. Apart from routes.ts because neither is in the
// seed's API: both are additions, with their own shapes in src/api/types.ts.
import type { FastifyInstance } from 'fastify';
import { request as httpRequest } from 'undici';
import { z } from 'zod';
import type { ModelLogView, ModelPlansView, ModelPlanView, PlannedReplicaView } from '../../api/types.js';
import { LlmgwError } from '../../errors/index.js';
import type { ZodTypeProvider } from '../../http/index.js';
import { agentDispatcher, certificateProblem, type PeerClient } from '../../tls/index.js';
import type { Catalog, Model } from '../catalog/index.js';
import type { Inventory } from '../inventory/index.js';
import { explain, type ProfileFit } from '../placement/index.js';
import { toPlacementProfile, type Plan, type ReplicaRecord } from '../reconciler/index.js';
import { usableMgmtAddr } from '../agentapi/report-checks.js';
import { needs, wholeNumberQuery } from '../../http/index.js';

export interface PlanAndLogsDeps {
  catalog: Catalog;
  inventory?: Inventory;
  /** A pass over the fleet as it is now, with these models added; nothing is applied. */
  previewPlacement?: (models: readonly Model[]) => Plan;
  /** Per model, which nodes could take a shard now, per profile, and why not the others; absent = plans carry no `fit`. */
  previewFit?: (models: readonly Model[]) => ReadonlyMap<string, readonly ProfileFit[]>;
  replicas?: () => readonly ReplicaRecord[];
  /** How long an agent may take to answer for a log; default 10 s. */
  agentTimeoutMs?: number;
  /** How agents' management APIs are called (https with agent_ca); absent = plain http. */
  agentMgmt?: PeerClient;
  /** Why the control plane refused the management address a node reported; undefined = it did not. Absent = never says. */
  mgmtRefusal?: (nodeId: string) => string | undefined;
}

/** The most models one plan request may carry. */
const MAX_PLANNED_MODELS = 100;

const PLAN_WANTED = 'want a model definition, or {"models": [definitions]}';

/** POST /api/v1/models/plan: an object; which definitions it holds, and whether they are sound, planView says. */
const PlanBodySchema = z.looseObject({}, { error: PLAN_WANTED });

/** The rank of the shard whose log is wanted stays a string: the answer to a bad one names the replica's ranks. */
const LogQuerySchema = z.object({
  shard: z.string().optional(),
  lines: wholeNumberQuery(10_000, 100),
});

export function registerPlanAndLogs(fastify: FastifyInstance, deps: PlanAndLogsDeps): void {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  app.post(
    '/api/v1/models/plan',
    { ...needs('fleet.read'), bodyLimit: 4 << 20, schema: { body: PlanBodySchema } },
    async (request): Promise<ModelPlansView> => planView(deps, request.body),
  );

  app.get(
    '/api/v1/replicas/:id/log',
    { ...needs('fleet.read'), schema: { params: z.object({ id: z.string() }), querystring: LogQuerySchema } },
    async (request): Promise<ModelLogView> => {
      const replica = deps.replicas?.().find((r) => r.id === request.params.id);
      if (!replica)
        throw new LlmgwError(
          'LLMGW_NOT_FOUND',
          `no replica has the id "${request.params.id}"; \`GET /api/v1/replicas\` lists them`,
        );
      const rank = request.query.shard === undefined ? 0 : Number(request.query.shard);
      const shard = replica.shards.find((s) => s.rank === rank);
      if (!Number.isInteger(rank) || !shard) {
        throw new LlmgwError(
          'LLMGW_BAD_REQUEST',
          `replica ${replica.id} has no shard of rank ${request.query.shard}; its ranks are ${replica.shards.map((s) => s.rank).join(', ')}`,
        );
      }
      const lines = request.query.lines;
      const node = deps.inventory?.get(shard.nodeId);
      const refusal = deps.mgmtRefusal?.(shard.nodeId);
      if (refusal !== undefined) {
        // 409, not a 5xx: the message is for the operator, and a 5xx body would hide it.
        throw new LlmgwError(
          'LLMGW_CONFLICT',
          `the control plane does not call node ${shard.nodeId}: it refused the node's ${refusal}; fix the agent's --mgmt-addr, or read the logs on the node under the agent's state directory`,
        );
      }
      if (!node?.mgmtAddr || !usableMgmtAddr(node.mgmtAddr)) {
        throw new LlmgwError(
          'LLMGW_UPSTREAM',
          `node ${shard.nodeId} reported no management address, so its engine logs cannot be fetched; read them on the node under the agent's state directory`,
        );
      }
      const timeoutMs = deps.agentTimeoutMs ?? 10_000;
      let res;
      try {
        res = await httpRequest(
          `${deps.agentMgmt?.scheme ?? 'http'}://${node.mgmtAddr}/mgmt/v1/shards/${encodeURIComponent(shard.id)}/log?lines=${lines}`,
          {
            headers: { authorization: `Bearer ${node.mgmtToken}` },
            headersTimeout: timeoutMs,
            bodyTimeout: timeoutMs,
            ...agentDispatcher(deps.agentMgmt, node.id),
          },
        );
      } catch (err) {
        throw new LlmgwError(
          'LLMGW_UPSTREAM',
          `cannot reach the agent of node ${node.id} at ${node.mgmtAddr}: ${certificateProblem(err, 'agent_ca') ?? (err as Error).message}`,
        );
      }
      const text = await res.body.text();
      if (res.statusCode === 404)
        throw new LlmgwError(
          'LLMGW_NOT_FOUND',
          `node ${node.id} has no log for shard ${shard.id} (yet): the engine may not have started there`,
        );
      if (res.statusCode !== 200)
        throw new LlmgwError(
          'LLMGW_UPSTREAM',
          `the agent of node ${node.id} answered ${res.statusCode}: ${text.slice(0, 200)}`,
        );
      const answer = JSON.parse(text) as { lines?: unknown };
      const got = Array.isArray(answer.lines) ? answer.lines.filter((l): l is string => typeof l === 'string') : [];
      return { replica: replica.id, shard: shard.id, rank, node: node.id, lines: got };
    },
  );
}

/**
 * A plan for the model definitions in `input` (one definition, or
 * {"models": [definitions]}): the API's answer, and the dashboard's plan
 * page's. Nothing is added.
 */
export function planView(
  deps: Pick<PlanAndLogsDeps, 'catalog' | 'inventory' | 'previewPlacement' | 'previewFit'>,
  input: unknown,
): ModelPlansView {
  const body = input as { models?: unknown } | undefined;
  const defs = Array.isArray(body?.models)
    ? body.models
    : body && typeof body === 'object' && !Array.isArray(body)
      ? [body]
      : null;
  if (!defs || defs.length === 0) throw new LlmgwError('LLMGW_BAD_REQUEST', PLAN_WANTED);
  if (defs.length > MAX_PLANNED_MODELS)
    throw new LlmgwError('LLMGW_BAD_REQUEST', `at most ${MAX_PLANNED_MODELS} models per plan; split the file`);
  if (!deps.previewPlacement)
    throw new LlmgwError('LLMGW_BAD_REQUEST', 'this control plane has no reconciler to plan with');
  // Every definition is checked first: one bad model in a file is a usage error for the whole file, nothing is planned.
  const problems: string[] = [];
  const models: Model[] = [];
  defs.forEach((def, i) => {
    try {
      models.push(deps.catalog.validate(def));
    } catch (err) {
      const name = (def as { name?: unknown } | null)?.name;
      problems.push(
        `model ${typeof name === 'string' ? JSON.stringify(name) : `#${i + 1}`}: ${(err as Error).message}`,
      );
    }
  });
  if (problems.length) throw new LlmgwError('LLMGW_CATALOG_INVALID', problems.join('\n'));
  const plan = deps.previewPlacement(models);
  const fits = deps.previewFit?.(models);
  const nodeCount = deps.inventory?.list().length ?? 0;
  return {
    models: models.map((m): ModelPlanView => {
      const placed: PlannedReplicaView[] = [];
      for (const a of plan.actions) {
        if ((a.kind !== 'create' && a.kind !== 'retry') || a.model !== m.name) continue;
        placed.push({
          profile: a.placement.profile,
          ...(a.placement.pool ? { pool: a.placement.pool } : {}),
          shards: a.placement.shards.map((s) => ({ node: s.nodeId, rank: s.rank, gpus: [...s.gpuIndices] })),
        });
      }
      const view: ModelPlanView = { name: m.name, wanted: m.scaling.min, placed };
      const fit = fits?.get(m.name);
      if (fit)
        view.fit = fit.map((f) => ({
          profile: f.profile,
          engine: f.engine,
          shards: f.shards,
          fits: [...f.fits],
          rejected: f.rejected.map((r) => ({ node: r.node, reasons: [...r.reasons] })),
        }));
      const rejected = plan.rejections.get(m.name);
      if (placed.length < m.scaling.min && rejected) {
        const profiles = m.profiles.map((p) => toPlacementProfile(p));
        view.explain = explain(m.name, rejected.rejections, {
          nodeCount: rejected.nodeCount || nodeCount,
          profiles,
          notes: rejected.notes,
        }).text;
      }
      return view;
    }),
  };
}
