// The agent listener's routes under /agent/v1. Join trades the join token
// for a node credential; every later call carries that credential. A wrong
// one is 401 and is logged with the node id, never with what was sent.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { LlmgwError } from '../../errors/index.js';
import {
  AGENT_API_PREFIX,
  HeartbeatRequestSchema,
  type HeartbeatResponse,
  JoinRequestSchema,
  type JoinResponse,
  PROTOCOL_VERSION,
  type ShardStatus,
} from '../../protocol/index.js';
import { type Inventory, type Node, NODE_JOIN_TOKEN_PREFIX } from '../inventory/index.js';
import type { AssignmentBoard } from './assignments.js';
import { checkMgmtAddr, declaredAddressing, type NodeAddressing, screenShards } from './report-checks.js';
import { bearerToken, type RouteJsonWording, type ZodTypeProvider } from '../../http/index.js';

export interface AgentApiOptions {
  inventory: Inventory;
  assignments: AssignmentBoard;
  /** Null: joining is closed (no join token configured). */
  joinToken: string | null;
  heartbeatIntervalMs: number;
  /** node_stale_after, ms, announced to agents so their call deadlines end inside it; absent = not announced. */
  staleAfterMs?: number;
  /** Called after each heartbeat with the node's reported shard states (the reconciler's input). */
  onShardReport?: (node: Node, shards: ShardStatus[]) => void;
  /**
   * With several control planes: once heartbeats received here have failed
   * to reach the store this long, heartbeats are refused (503), so agents
   * move to another control plane instead of looking silent to the leader.
   * Absent = never (one control plane: there is nowhere else to go).
   */
  refuseHeartbeatsUnsavedForMs?: number;
  /**
   * Told at each join whether the node's mgmt_addr was refused (the reason)
   * or taken (null), so collect and logs can say why they cannot reach a
   * node. Absent = not told.
   */
  onMgmtAddrChecked?: (nodeId: string, refusal: string | null) => void;
}

export function registerAgentApi(fastify: FastifyInstance, options: AgentApiOptions): void {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const joinCheck = constantTimeCheck(options.joinToken);
  // What each node declared at its last join here: a heartbeat whose report leaves it out is still held to it.
  const declaredAtJoin = new Map<string, Omit<NodeAddressing, 'sourceAddr'>>();
  // Endpoint refusals already logged, by node and shard: the reason last logged (logged again only when it changes).
  const loggedRefusals = new Map<string, string>();
  const staleAfter = options.staleAfterMs !== undefined ? { node_stale_after_ms: options.staleAfterMs } : {};

  const join: RouteJsonWording = { invalidBody: 'join request' };
  app.post(
    `${AGENT_API_PREFIX}/join`,
    { schema: { body: JoinRequestSchema }, config: join },
    async (request, reply) => {
      const body = request.body;
      // A per-node token is an admin's act for one node id: it is used up here, before the join, so it admits once.
      const sharedToken = joinCheck(body.join_token);
      const nodeToken =
        !sharedToken &&
        body.join_token.startsWith(NODE_JOIN_TOKEN_PREFIX) &&
        (await options.inventory.consumeJoinToken(body.join_token, body.node_id));
      if (!nodeToken && !sharedToken) {
        request.log.warn({ node: body.node_id, ip: request.ip }, 'join refused: wrong join token');
        throw new LlmgwError(
          'LLMGW_JOIN_REFUSED',
          body.join_token.startsWith(NODE_JOIN_TOKEN_PREFIX)
            ? `the per-node join token is unknown, used, expired or for another node than "${body.node_id}"; ask an admin for a new one (llmgw ctl join-token create --node ${body.node_id})`
            : options.joinToken === null
              ? 'this control plane accepts no agents: it has no join_token configured'
              : 'the join token is wrong',
        );
      }
      // Checked now, recorded only once the join is won: a refused join must not
      // change what the live node under this id declared or why its address was refused.
      const addressing = checkJoinAddresses(request, body);
      const mgmtAddr = addressing.mgmtAddr;
      let joined: { credential: string; mgmtToken: string };
      try {
        joined = await options.inventory.join(
          {
            id: body.node_id,
            hostname: body.hostname ?? null,
            mgmtAddr,
            labels: body.labels ?? {},
            agentVersion: body.agent_version ?? null,
            protocolVersion: body.protocol_version ?? null,
          },
          { previousCredential: body.credential ?? null, nodeToken },
        );
      } catch (err) {
        if (err instanceof LlmgwError && err.code === 'LLMGW_NODE_ID_TAKEN')
          request.log.warn({ node: body.node_id, ip: request.ip }, 'join refused: the node id belongs to a live node');
        throw err;
      }
      const { credential, mgmtToken } = joined;
      declaredAtJoin.set(body.node_id, addressing.declared);
      if (addressing.refusal !== null) {
        request.log.warn(
          { node: body.node_id, field: 'mgmt_addr', ip: request.ip, reason: addressing.refusal },
          'refused the management address a node reported; collect and logs will not call it',
        );
      }
      options.onMgmtAddrChecked?.(body.node_id, addressing.refusal);
      request.log.info({ node: body.node_id, agent_version: body.agent_version, node_token: nodeToken }, 'node joined');
      const answer: JoinResponse = {
        node_id: body.node_id,
        credential,
        mgmt_token: mgmtToken,
        heartbeat_interval_ms: options.heartbeatIntervalMs,
        ...staleAfter,
      };
      return reply.send(answer);
    },
  );

  // Not an async function: at 10,000 nodes most heartbeats are held (long-poll)
  // for seconds, and an async handler's suspended frame keeps the parsed
  // body, the report and everything else in scope alive for the whole wait.
  // Held, each outlives the young generation and is promoted, so what a held
  // heartbeat keeps is what sets the control plane's memory (docs/heartbeats.md).
  // The wait below keeps only the node id and what the answer needs.
  const heartbeat: RouteJsonWording = { invalidBody: 'heartbeat' };
  app.post(
    `${AGENT_API_PREFIX}/heartbeat`,
    { schema: { body: HeartbeatRequestSchema }, config: heartbeat },
    (request, reply) => {
      const body = request.body;
      // Fastify keeps the body it parsed on the request until the answer, seconds for a held heartbeat; nothing reads it after this.
      (request as { body: unknown }).body = undefined;
      const node = authenticate(request, options.inventory, body.node_id);
      const unsavedMs = options.inventory.unsavedHeartbeatsMs();
      if (options.refuseHeartbeatsUnsavedForMs !== undefined && unsavedMs > options.refuseHeartbeatsUnsavedForMs) {
        throw new LlmgwError(
          'LLMGW_STORE_UNAVAILABLE',
          `this control plane has not been able to save heartbeats to the store for ${Math.round(unsavedMs / 1000)} s, so the leader would not see this node; heartbeat to another control plane`,
        );
      }
      const { reportProblem, mgmtToken, sendReport } = options.inventory.heartbeat(node, {
        ...(body.report !== undefined ? { report: body.report } : {}),
        ...(body.report_hash !== undefined ? { reportHash: body.report_hash } : {}),
        agentVersion: body.agent_version ?? null,
        protocolVersion: body.protocol_version ?? null,
      });
      if (reportProblem) request.log.info({ node: node.id }, reportProblem);
      // A keep-alive carries no report: the endpoints are held to the one held here, which the hash says still stands.
      const report = body.report ?? node.report;
      if (body.shards)
        options.onShardReport?.(
          node,
          checkedShards(request, node.id, report, body.shards, declaredAtJoin, loggedRefusals),
        );
      const answer = heartbeatAnswer(node.id, mgmtToken, sendReport);
      // Asked for its report, the agent is answered at once so that it sends it now rather than after a held poll.
      if (body.known_generation === undefined || !body.wait_ms || sendReport) return answer();
      // The response's close, not the request's: in Node the request emits
      // 'close' as soon as its body has been read, which would end every wait at once.
      const response = reply.raw;
      return options.assignments
        .waitForChange(node.id, body.known_generation, body.wait_ms, (cancel) => {
          response.on('close', cancel);
          return () => response.removeListener('close', cancel);
        })
        .then(answer);
    },
  );

  /** What answers a node's heartbeat, made when it is sent: the generation and shards are read then, after any wait. */
  function heartbeatAnswer(nodeId: string, mgmtToken: string, sendReport: boolean): () => HeartbeatResponse {
    return () => {
      const { generation, shards } = options.assignments.get(nodeId);
      const reportHash = options.inventory.reportHashOf(nodeId);
      return {
        node_id: nodeId,
        generation,
        shards,
        heartbeat_interval_ms: options.heartbeatIntervalMs,
        mgmt_token: mgmtToken,
        ...staleAfter,
        ...(sendReport ? { send_report: true } : {}),
        ...(reportHash !== null ? { report_hash: reportHash } : {}),
      };
    };
  }

  app.get(`${AGENT_API_PREFIX}/version`, async () => ({ protocol_version: PROTOCOL_VERSION }));
}

/**
 * What a join declares about where the node listens, and its mgmt_addr if
 * that is one of the node's own addresses (null otherwise, with the reason
 * in `refusal`). No side effects: the caller records them after the join succeeds.
 */
function checkJoinAddresses(
  request: FastifyRequest,
  body: { node_id: string; mgmt_addr?: string | undefined },
): { declared: Omit<NodeAddressing, 'sourceAddr'>; mgmtAddr: string | null; refusal: string | null } {
  const { sourceAddr: _source, ...declared } = declaredAddressing(body, request.ip);
  if (body.mgmt_addr === undefined) return { declared, mgmtAddr: null, refusal: null };
  const check = checkMgmtAddr(body.mgmt_addr, { sourceAddr: request.ip, ...declared });
  return check.ok
    ? { declared, mgmtAddr: check.value, refusal: null }
    : { declared, mgmtAddr: null, refusal: check.reason };
}

/** The heartbeat's shards with their endpoints checked against where this node may listen; each refusal logged. */
function checkedShards(
  request: FastifyRequest,
  nodeId: string,
  report: unknown,
  shards: ShardStatus[],
  declaredAtJoin: Map<string, Omit<NodeAddressing, 'sourceAddr'>>,
  loggedRefusals: Map<string, string>,
): ShardStatus[] {
  const fromReport = declaredAddressing(report, request.ip);
  const atJoin = declaredAtJoin.get(nodeId);
  const engineHost = fromReport.engineHost ?? atJoin?.engineHost ?? null;
  const node: NodeAddressing = {
    sourceAddr: request.ip,
    engineHost,
    engineHostIgnored: engineHost === null ? (fromReport.engineHostIgnored ?? atJoin?.engineHostIgnored) : undefined,
    portRange: fromReport.portRange ?? atJoin?.portRange ?? null,
  };
  const screened = screenShards(shards, node);
  for (const r of screened.refused) {
    // Once per shard and reason, not at every heartbeat.
    const seen = `${nodeId}\u0000${r.shardId}`;
    if (loggedRefusals.get(seen) === r.reason) continue;
    loggedRefusals.set(seen, r.reason);
    if (loggedRefusals.size > 10_000) loggedRefusals.clear();
    request.log.warn(
      { node: nodeId, shard: r.shardId, field: 'endpoint', ip: request.ip, reason: r.reason },
      'refused the endpoint a node reported for a shard; it is not routed to',
    );
  }
  return screened.shards;
}

function authenticate(request: FastifyRequest, inventory: Inventory, nodeId: string): Node {
  const token = bearerToken(request.headers.authorization);
  const node = token === null ? null : inventory.authenticate(nodeId, token);
  if (!node) {
    request.log.warn({ node: nodeId, ip: request.ip }, 'agent call refused: unknown node or wrong credential');
    throw new LlmgwError(
      'LLMGW_JOIN_REFUSED',
      `node "${nodeId}" is unknown here or its credential is wrong; the agent will join again, proving its saved credential`,
    );
  }
  return node;
}

function constantTimeCheck(secret: string | null): (candidate: string) => boolean {
  if (secret === null) return () => false;
  const want = createHash('sha256').update(secret).digest();
  return (candidate) => timingSafeEqual(want, createHash('sha256').update(candidate).digest());
}
