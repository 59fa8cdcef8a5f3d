// The agent protocol under /agent/v1: join, then heartbeat. The heartbeat
// carries the node's full report and is answered with the shards the node
// should run, so the exchange is level-triggered: a lost answer is repaired
// by the next one. It long-polls, so an admin action reaches the agent within
// a second instead of at the next tick. Both sides read each other leniently
// (unknown fields dropped, missing ones unknown) so that newer and older
// agents and control planes work together.
import { z } from 'zod';
import { KvEventsEndpointSchema } from './kv-events.js';
import { PortRangeSchema, ShardLoadSchema } from './node-report.js';
import { ReadShardStateSchema } from './shard-state.js';
import { plainName } from './text.js';

export const AGENT_API_PREFIX = '/agent/v1';

export const JoinRequestSchema = z.object({
  /** The fleet's shared join token, or a per-node join token an admin created for this node id. */
  join_token: z.string().max(4096),
  node_id: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, 'want 1-128 letters, digits, ".", "_" or "-"'),
  hostname: plainName('hostname', 256).optional(),
  agent_version: plainName('agent version', 64).optional(),
  protocol_version: z.number().int().optional(),
  labels: z.record(plainName('label key', 128), plainName('label value', 256)).optional(),
  /** host:port where the agent's management API listens (collect, logs); absent = none. */
  mgmt_addr: z.string().max(300).optional(),
  /** The host the control plane reaches this node's engines at; absent = not declared (an older agent, or engines on a wildcard). */
  engine_host: z.string().max(256).optional(),
  /** The ports the agent gives engines, inclusive; absent = not declared (an older agent). */
  port_range: PortRangeSchema.optional(),
  /**
   * The credential the agent saved from its previous join, proving it is the
   * node that holds this id: a live node's id is given only to a join that
   * proves it (or uses a per-node join token). Absent = a fresh agent.
   */
  credential: z.string().max(4096).optional(),
});
export type JoinRequest = z.infer<typeof JoinRequestSchema>;

export const JoinResponseSchema = z.object({
  node_id: z.string(),
  /** The node credential: sent as a bearer on every later call. The control plane keeps only its hash. */
  credential: z.string(),
  /** The token the control plane presents when it calls the agent's management API. */
  mgmt_token: z.string(),
  heartbeat_interval_ms: z.number().int().positive().optional(),
  /** The control plane's node_stale_after, ms: agents end every call well inside it. Absent = not announced (an older control plane). */
  node_stale_after_ms: z.number().int().positive().optional(),
});
export type JoinResponse = z.infer<typeof JoinResponseSchema>;

/** What an agent says about one shard it runs (or is preparing). */
export const ShardStatusSchema = z.object({
  shard_id: z.string(),
  replica_id: z.string(),
  /** A ShardState when sent; read as 'unknown' when this side does not know it (shard-state.ts). */
  state: ReadShardStateSchema,
  /** http://host:port of an API-serving shard; absent for other ranks or before it listens. */
  endpoint: z.string().optional(),
  error: z.string().optional(),
  restarts: z.number().int().optional(),
  /**
   * With state 'failed': the agent will start this engine again by itself,
   * soon (a crash, a hang, within its restart budget), so the control plane
   * keeps the replica where it is rather than placing it again. Absent: no
   * restart is coming (or an older agent), and the failure is the replica's.
   */
  restarting: z.boolean().optional(),
  /** The engine's load at the agent's last scrape; absent = not scraped (not ready, no metrics, an older agent). */
  load: ShardLoadSchema,
  /**
   * Where the API shard's engine tells what its KV cache holds; absent = it
   * tells nothing (or an older agent). A value this side cannot read is
   * dropped rather than failing the status.
   */
  kv_events: KvEventsEndpointSchema.optional().catch(undefined),
  fetch: z
    .object({ bytes_done: z.number(), total_bytes: z.number().optional(), bytes_per_second: z.number().optional() })
    .optional(),
});
export type ShardStatus = z.infer<typeof ShardStatusSchema>;

export const HeartbeatRequestSchema = z.object({
  node_id: z.string(),
  agent_version: plainName('agent version').optional(),
  protocol_version: z.number().int().optional(),
  /** Validated by the receiver against NodeReportSchema on its own, so that a bad report keeps the previous one instead of failing the heartbeat. */
  report: z.unknown().optional(),
  /**
   * The hash of the agent's report (src/protocol/report-hash), sent on every
   * heartbeat. With a report: the report's hash. Without one: a keep-alive,
   * saying the report the control plane holds under this hash still stands.
   * Absent = an older agent, which sends its full report every time.
   */
  report_hash: z.string().max(128).optional(),
  shards: z.array(ShardStatusSchema).optional(),
  /** The assignment generation the agent last saw; the answer waits while it is still current. Absent = answer at once. */
  known_generation: z.number().int().optional(),
  /** How long the control plane may hold the answer, ms; 0 or absent = answer at once. */
  wait_ms: z.number().int().min(0).max(60_000).optional(),
});
export type HeartbeatRequest = z.infer<typeof HeartbeatRequestSchema>;

/** One shard the node should run. Everything the agent needs to start it, nothing it must look up. */
export const ShardAssignmentSchema = z.object({
  shard_id: z.string(),
  replica_id: z.string(),
  model: z.string(),
  aliases: z.array(z.string()).default([]),
  source: z.string(),
  profile: z.object({
    name: z.string(),
    engine: z.string(),
    gpus: z.number().int(),
    shards: z.number().int(),
    args: z.array(z.string()).default([]),
    env: z.record(z.string(), z.string()).default({}),
  }),
  rank: z.number().int(),
  gpu_indices: z.array(z.number().int()),
  /** Fabric addresses of every shard of the replica, by rank (rank 0 first); empty for a one-node replica. */
  peers: z.array(z.object({ rank: z.number().int(), node_id: z.string(), address: z.string().optional() })).default([]),
  /**
   * The replica's secret: the engine is started asking it (--api-key) of
   * every API request, and the router sends it. The same for every shard of
   * the replica and for its whole life, so an agent that restarts and adopts
   * its engines hears it again. Absent = the engine asks no key (a control
   * plane from before secrets). Never logged or shown.
   */
  engine_secret: z.string().min(1).max(512).optional(),
});
export type ShardAssignment = z.infer<typeof ShardAssignmentSchema>;

export const HeartbeatResponseSchema = z.object({
  node_id: z.string(),
  generation: z.number().int(),
  shards: z.array(ShardAssignmentSchema).default([]),
  heartbeat_interval_ms: z.number().int().positive().optional(),
  /**
   * The token the control plane presents to the agent's management API now.
   * The agent saves it when it differs from the one it holds (the control
   * plane issued a new one, e.g. after its join token was rotated). Absent
   * = unchanged (an older control plane).
   */
  mgmt_token: z.string().optional(),
  /** As in the join answer: node_stale_after, ms; absent = not announced. */
  node_stale_after_ms: z.number().int().positive().optional(),
  /**
   * True: the control plane holds no report under the hash this heartbeat
   * named (it restarted, the node moved to it from another instance, or the
   * report changed), so the agent sends its full report now. The answer is
   * then given at once, not held. Absent = the report held is current.
   */
  send_report: z.boolean().optional(),
  /**
   * The hash of the node's report this control plane holds. An agent sends
   * a keep-alive (its hash, no report) only while its report hashes to this;
   * otherwise its full report. Absent = none held, or an older control
   * plane that does not take keep-alives: the agent sends its full report.
   */
  report_hash: z.string().optional(),
});
export type HeartbeatResponse = z.infer<typeof HeartbeatResponseSchema>;
