// Admin routes about who may be a node: removing one (its id is freed),
// approving a pending one, and per-node join tokens. Apart from the routes
// that read and cordon nodes because these change the fleet's membership,
// not its work, and each is an admin's act recorded in the audit log.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { JoinTokenCreatedView, JoinTokenView, NodeApprovedView, NodeRemovedView } from '../../api/types.js';
import { LlmgwError } from '../../errors/index.js';
import { parseDurationMs } from '../../units/index.js';
import { actorOf, type ZodTypeProvider, needs } from '../../http/index.js';
import type { Inventory } from '../inventory/index.js';
import type { JoinTokenRow } from '../store/index.js';

export interface NodeIdentityRouteOptions {
  /** Absent: a control plane built without one (catalog-only tests); every route answers 404 for nodes, and the join-token routes are not mounted. */
  inventory?: Inventory;
  now?: () => number;
  /** Replicas per node, from the reconciler; absent = none known. */
  nodeUsage?: () => ReadonlyMap<string, { replicas: number }>;
  /** Called after membership changed: the reconciler's Notify. */
  onNodeState?: (nodeId: string) => void;
}

const NODE_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
/** How long a per-node join token may live: it is a one-off for a machine being set up, not a standing secret. */
const MAX_JOIN_TOKEN_MS = 7 * 24 * 3600_000;
const DEFAULT_JOIN_TOKEN_EXPIRY = '1h';

const NODE_WANTED =
  'want the node id the token admits (1-128 letters, digits, ".", "_" or "-"), e.g. {"node":"gpu-7","expires":"1h"}';

/** POST /api/v1/join-tokens. No body reads as {}, which names what is wanted. */
const JoinTokenBodySchema = z
  .object({
    node: z.string({ error: NODE_WANTED }).regex(NODE_ID, NODE_WANTED),
    /** How long the token admits, as a duration; absent = DEFAULT_JOIN_TOKEN_EXPIRY. Read as ms. */
    expires: z
      .string({ error: 'want a duration string like "1h"' })
      .transform((text, ctx) => {
        const ms = parseDurationMs(text);
        if (typeof ms === 'string') ctx.addIssue({ code: 'custom', message: ms });
        else if (ms <= 0 || ms > MAX_JOIN_TOKEN_MS)
          ctx.addIssue({
            code: 'custom',
            message: `want more than 0 and at most 7d (a per-node join token is for setting up one machine); got ${text}`,
          });
        return typeof ms === 'string' ? 0 : ms;
      })
      .prefault(DEFAULT_JOIN_TOKEN_EXPIRY),
  })
  .prefault({} as { node: string });

export function registerNodeIdentityRoutes(fastify: FastifyInstance, options: NodeIdentityRouteOptions): void {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const now = options.now ?? Date.now;
  const inventoryOrThrow = (id: string): Inventory => {
    if (!options.inventory) throw new LlmgwError('LLMGW_NODE_NOT_FOUND', `no node "${id}"`);
    return options.inventory;
  };

  // A live node still serving is most likely removed by mistake: drain first
  // (make-before-break), or say --force and have its replicas replaced as
  // if it were lost. A lost node goes at once: its replicas are already being replaced.
  const params = z.object({ id: z.string() });
  app.delete(
    '/api/v1/nodes/:id',
    { ...needs('nodes.write'), schema: { params, querystring: z.object({ force: z.string().optional() }) } },
    async (request) => {
      const id = request.params.id;
      const inventory = inventoryOrThrow(id);
      const node = inventory.get(id);
      if (!node) throw new LlmgwError('LLMGW_NODE_NOT_FOUND', `no node "${id}"; llmgw ctl nodes lists the fleet`);
      const replicas = options.nodeUsage?.().get(id)?.replicas ?? 0;
      const liveness = inventory.liveness(node);
      const force = request.query.force === 'true';
      if (replicas > 0 && liveness !== 'lost' && !force) {
        throw new LlmgwError(
          'LLMGW_NODE_HAS_REPLICAS',
          `node ${id} is ${liveness} and runs ${replicas} replica${replicas === 1 ? '' : 's'}; drain it first (llmgw ctl nodes drain ${id}) so they move before it goes, or add --force to remove it now and have them replaced elsewhere`,
        );
      }
      await inventory.remove(id, actorOf(request), { liveness, replicas, force });
      options.onNodeState?.(id);
      const answer: NodeRemovedView = {
        removed: id,
        replicas,
        note:
          (replicas > 0
            ? `its ${replicas} replica${replicas === 1 ? ' is' : 's are'} replaced elsewhere, as a lost node's would be; `
            : '') +
          'its credential no longer works and its id is free to join again; a running agent that still holds the credential joins again by proving it, so stop that agent first if the machine is to stay out',
      };
      return answer;
    },
  );

  app.post('/api/v1/nodes/:id/approve', { ...needs('nodes.write'), schema: { params } }, async (request) => {
    const node = await inventoryOrThrow(request.params.id).approve(request.params.id, actorOf(request));
    options.onNodeState?.(node.id);
    const answer: NodeApprovedView = {
      approved: node.id,
      ...(node.approvedHardware ? { hardware: node.approvedHardware } : {}),
    };
    return answer;
  });

  // Per-node join tokens admit a node into the inventory; a control plane
  // built without one (catalog-only tests) has nowhere to admit it, so the
  // routes are not mounted and answer 404 like any unknown path. (Every real
  // control plane has an inventory, with any store, `none` included.)
  const { inventory } = options;
  if (!inventory) return;

  app.post(
    '/api/v1/join-tokens',
    { ...needs('nodes.write'), schema: { body: JoinTokenBodySchema } },
    async (request, reply) => {
      const { node, expires: ms } = request.body;
      const { token, row } = await inventory.createJoinToken(node, now() + ms, actorOf(request));
      const answer: JoinTokenCreatedView = { ...joinTokenView(row, now()), token };
      return reply.code(201).send(answer);
    },
  );

  app.get('/api/v1/join-tokens', needs('fleet.read'), async () =>
    (await inventory.listJoinTokens()).map((r) => joinTokenView(r, now())),
  );
}

function joinTokenView(row: JoinTokenRow, nowMs: number): JoinTokenView {
  return {
    id: row.id,
    node: row.node,
    expires_at: new Date(row.expiresAtMs).toISOString(),
    created_at: new Date(row.createdAtMs).toISOString(),
    created_by: row.createdBy,
    ...(row.usedAtMs === null ? {} : { used_at: new Date(row.usedAtMs).toISOString() }),
    status: row.usedAtMs !== null ? 'used' : row.expiresAtMs <= nowMs ? 'expired' : 'unused',
  };
}
