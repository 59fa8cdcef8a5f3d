// The operator's "why" answers, questions 1, 2 and 4 of the operator's
// truth: why is this model not running, why is this node idle, what is this
// drain waiting for. Each is a pure function over a snapshot (records,
// rejections, nodes as placement reads them, `now` passed in), so the admin
// API, ctl and the dashboard show one computation, and a unit test can build
// any situation from plain objects. Apart from views.ts because these answer
// a question with a cause, where the views list what is.
import type {
  DrainWaitView,
  NodeIdleView,
  NodeModelFitView,
  NotRunningView,
  ProfileFitCountView,
  ShardFetchView,
} from '../../api/types.js';
import { explain, place, type PlacementNode, type PlacementProfile } from '../placement/index.js';
import { formatBytes } from '../../units/index.js';
import {
  type BlockedDrain,
  COUNTING_STATES,
  type ModelRejections,
  type ReplicaRecord,
  toPlacementProfile,
  weightsKeyOf,
} from '../reconciler/index.js';
import type { PlanModel } from '../reconciler/plan-types.js';

/** A model as the answers read it: the catalog's compiled model is one. */
export type WhyModel = PlanModel;

export interface ModelWhyInput {
  readonly model: WhyModel;
  /** Every replica the control plane holds; those of other models are ignored. */
  readonly replicas: readonly ReplicaRecord[];
  /** The last pass's rejections for the model; undefined = nothing failed to place. */
  readonly rejections: ModelRejections | undefined;
  /** Download progress of a fetching shard; undefined = none reported. */
  readonly fetch?: (shardId: string) => ShardFetchView | undefined;
  readonly nowMs: number;
}

export interface ModelWhy {
  summary: string[];
  min_replicas: number;
  ready_replicas: number;
  profiles?: ProfileFitCountView[];
  not_running?: NotRunningView[];
}

/** Question 1: why is this model not running (or, when it is, that it is and with how many). */
export function modelWhy(input: ModelWhyInput): ModelWhy {
  const { model, nowMs } = input;
  const own = input.replicas.filter((r) => r.model === model.name);
  const counting = own.filter((r) => COUNTING_STATES.has(r.state));
  const ready = counting.filter((r) => r.state === 'ready').length;
  const min = model.scaling.min;
  const profiles = input.rejections ? profileFits(model, input.rejections) : undefined;
  const notRunning = own
    .filter((r) => (COUNTING_STATES.has(r.state) && r.state !== 'ready') || r.state === 'failed')
    .map((r) => notRunningOf(r, input.fetch, nowMs));

  const summary: string[] = [];
  const rejected = !!input.rejections?.rejections.length;
  if (ready > 0) {
    summary.push(`model ${model.name} is running: ${ready} ready replica${ready === 1 ? '' : 's'} (min ${min})`);
    if (rejected) {
      summary.push(
        input.rejections!.purpose === 'drain'
          ? 'but no node can take the replacement for its replica on a draining node:'
          : 'but the last pass could not place another replica it wanted:',
      );
    }
  } else if (rejected) {
    const nodes = input.rejections!.nodeCount;
    summary.push(
      `model ${model.name} is not running and not placed: no node can run any of its profiles (${nodes} node${nodes === 1 ? '' : 's'} checked)`,
    );
  } else if (counting.length > 0) {
    summary.push(
      `model ${model.name} is not running yet: ${counting.length} replica${counting.length === 1 ? ' is' : 's are'} placed and not ready`,
    );
  } else if (own.some((r) => r.state === 'failed')) {
    summary.push(`model ${model.name} is not running: its replicas failed`);
  } else if (min === 0) {
    summary.push(
      `model ${model.name} is not running because it wants none: min 0 and no request has asked for it (the first request starts one)`,
    );
  } else {
    summary.push(`model ${model.name} is not running: the reconciler has not placed it yet (min ${min})`);
  }
  for (const p of profiles ?? []) summary.push(p.line);
  if (input.rejections) for (const n of input.rejections.notes) summary.push(n.text);
  for (const r of notRunning) summary.push(`replica ${r.replica} ${r.reason}`);
  return {
    summary,
    min_replicas: min,
    ready_replicas: ready,
    ...(profiles?.length ? { profiles } : {}),
    ...(notRunning.length ? { not_running: notRunning } : {}),
  };
}

function profileFits(model: WhyModel, rejections: ModelRejections): ProfileFitCountView[] {
  const placementProfiles: PlacementProfile[] = model.profiles.map(toPlacementProfile);
  const summary = explain(model.name, rejections.rejections, {
    nodeCount: rejections.nodeCount,
    profiles: placementProfiles,
  });
  return summary.profiles.map((p) => ({
    profile: p.profile,
    ...(p.pool === undefined ? {} : { pool: p.pool }),
    nodes_fit: p.nodesFit,
    node_count: p.nodeCount,
    line: p.line,
  }));
}

function notRunningOf(r: ReplicaRecord, fetch: ModelWhyInput['fetch'], nowMs: number): NotRunningView {
  const nodes = r.shards.map((s) => s.nodeId);
  const on = nodes.length ? ` on ${[...new Set(nodes)].join(', ')}` : '';
  const shardError = r.shards.find((s) => s.error)?.error ?? null;
  let reason: string;
  let retryIn: number | undefined;
  switch (r.state) {
    case 'pending':
      reason = `is placed${on} and waits for its agent to start it`;
      break;
    case 'fetching': {
      const progress = r.shards
        .map((s) => (s.state === 'fetching' ? fetch?.(s.id) : undefined))
        .find((f) => f !== undefined);
      reason = `is fetching its weights${on}: ${progress ? fetchWords(progress) : 'no progress reported yet'}`;
      break;
    }
    case 'starting':
      // A starting shard that carries an error has had its engine exit already: the agent restarts it, so it crash-loops.
      reason = shardError
        ? `is crash-looping${on}: its engine exits before it is ready and the agent starts it again; last error: ${shardError}`
        : `is starting${on}: its engine does not answer its readiness check yet`;
      break;
    default: {
      const error = r.error ?? shardError;
      const failures = r.failures > 0 ? `failed ${r.failures} time${r.failures === 1 ? '' : 's'} in a row` : 'failed';
      if (r.nextRetryAtMs !== null) retryIn = Math.max(0, Math.ceil((r.nextRetryAtMs - nowMs) / 1000));
      reason = `${failures}${on}: ${error ?? 'no error reported'}${retryIn === undefined ? '' : `; tried again in ${retryIn} s`}`;
    }
  }
  const lastError = r.error ?? shardError;
  if (r.state !== 'failed' && lastError && !reason.includes(lastError)) reason += ` (last error: ${lastError})`;
  return {
    replica: r.id,
    profile: r.profile,
    state: r.state,
    nodes,
    since_seconds: Math.max(0, Math.floor((nowMs - r.stateSinceMs) / 1000)),
    reason,
    ...(r.failures > 0 ? { failures: r.failures } : {}),
    ...(retryIn === undefined ? {} : { retry_in_seconds: retryIn }),
  };
}

function fetchWords(f: ShardFetchView): string {
  const pct = f.total_bytes ? ` (${Math.floor((100 * f.bytes_done) / f.total_bytes)}%)` : '';
  const rate = f.bytes_per_second ? ` at ${formatBytes(f.bytes_per_second)}/s` : '';
  return `${formatBytes(f.bytes_done)} of ${f.total_bytes ? formatBytes(f.total_bytes) : 'an unknown size'}${pct}${rate}`;
}

export interface NodeIdleInput {
  /** The node as placement reads it, with the GPUs replicas hold already in gpusInUse. */
  readonly node: PlacementNode;
  /** How long since its last heartbeat, in words ("4s"); '' = never. */
  readonly lastSeenAgo: string;
  readonly models: readonly WhyModel[];
  readonly replicas: readonly ReplicaRecord[];
}

/**
 * Question 2: why does this node run nothing. The node's own state first
 * (lost, cordoned, waiting for approval), then model by model: placement is
 * asked about this node alone, so "cannot run it" carries placement's own
 * sentence ("needs 2 GPUs…; 0 are free") and "fits" says where the model's
 * replicas went instead.
 */
export function nodeIdle(input: NodeIdleInput): NodeIdleView {
  const { node } = input;
  const own: string[] = [];
  if (node.liveness === 'lost')
    own.push(
      `node ${node.id} is lost: no heartbeat for ${input.lastSeenAgo || 'ever since it joined'}, so nothing is placed on it`,
    );
  else if (node.liveness === 'stale')
    own.push(
      `node ${node.id} is stale: its last heartbeat was ${input.lastSeenAgo} ago, so nothing new is placed on it until it reports`,
    );
  if (node.adminState === 'cordoned')
    own.push(`node ${node.id} is cordoned: it takes no new replicas (llmgw ctl nodes uncordon ${node.id})`);
  if (node.adminState === 'draining')
    own.push(
      `node ${node.id} is draining: its replicas moved off and it takes no new ones (llmgw ctl nodes uncordon ${node.id})`,
    );
  if (node.pendingApproval)
    own.push(
      `node ${node.id} waits for an admin's approval and takes no replicas (llmgw ctl nodes approve ${node.id})`,
    );

  const models: NodeModelFitView[] = input.models.map((m) => modelFit(node, m, input.replicas));
  const reasons = [...own];
  if (input.models.length === 0) {
    reasons.push('the catalog has no model (llmgw ctl models add FILE)');
  } else if (own.length === 0) {
    const fitting = models.filter((m) => m.fits);
    const wanting = fitting.filter((m) => m.replicas < m.min_replicas);
    if (fitting.length === 0)
      reasons.push(`none of the ${models.length} model${models.length === 1 ? '' : 's'} in the catalog can run here:`);
    else if (wanting.length === 0)
      reasons.push(
        `every model that could run here already has the replicas it wants on other nodes or wants none: ${fitting.map((m) => (m.replicas ? `${m.model} on ${m.nodes.join(', ')}` : `${m.model} wants none`)).join('; ')}`,
      );
    else
      reasons.push(
        `${wanting.map((m) => m.model).join(', ')} could run here and wants more replicas: the next reconciler pass should place one`,
      );
  }
  for (const m of models) reasons.push(`model ${m.model}: ${m.reason}`);
  return { reasons, models };
}

function modelFit(node: PlacementNode, model: WhyModel, replicas: readonly ReplicaRecord[]): NodeModelFitView {
  const counting = replicas.filter((r) => r.model === model.name && COUNTING_STATES.has(r.state));
  const nodes = [...new Set(counting.flatMap((r) => r.shards.map((s) => s.nodeId)))].sort();
  const base = { model: model.name, replicas: counting.length, nodes, min_replicas: model.scaling.min };
  const result = place(
    { nodes: [node] },
    { model: model.name, weightsKey: weightsKeyOf(model.source), profiles: model.profiles.map(toPlacementProfile) },
  );
  if (!result.ok) {
    const mine = result.rejections.filter((r) => r.node === node.id || r.node === undefined);
    const byProfile = new Map<string, string[]>();
    for (const r of mine) byProfile.set(r.profile, [...(byProfile.get(r.profile) ?? []), r.reason]);
    const words = [...byProfile]
      .map(([p, rs]) => (byProfile.size > 1 ? `profile ${p}: ${rs.join('; ')}` : rs.join('; ')))
      .join(' | ');
    return { ...base, fits: false, reason: `cannot run here: ${words || 'placement rejected it'}` };
  }
  const profile = result.placement.profile;
  if (counting.length === 0) {
    return {
      ...base,
      fits: true,
      reason:
        model.scaling.min === 0
          ? `fits (profile ${profile}), but wants no replica: min 0 and no request has asked for it`
          : `fits (profile ${profile}) and wants ${model.scaling.min}: the next reconciler pass should place one`,
    };
  }
  return {
    ...base,
    fits: true,
    reason: `fits (profile ${profile}), but its ${counting.length} replica${counting.length === 1 ? ' runs' : 's run'} on ${nodes.join(', ')}${counting.length >= model.scaling.min ? `, enough for min ${model.scaling.min}` : ''}`,
  };
}

export interface DrainWaitsInput {
  readonly nodeId: string;
  readonly replicas: readonly ReplicaRecord[];
  /** Requests the router has in flight on a replica; undefined = none reported. */
  readonly inFlight?: (replicaId: string) => number | undefined;
  /** How long a draining replica may finish what it serves before it is stopped anyway. */
  readonly drainDeadlineMs: number;
  readonly blockedDrains: readonly BlockedDrain[];
  /** The last pass's rejections for a model; a blocked drain's cause. */
  readonly rejections: (model: string) => ModelRejections | undefined;
  readonly models: readonly WhyModel[];
  readonly nowMs: number;
}

/**
 * Question 4: what does this node's drain wait for. One entry per replica
 * still on the node: a replacement to be placed (and if none can be, why),
 * the replacement to become ready, requests in flight, or the engine to exit.
 */
export function drainWaits(input: DrainWaitsInput): DrainWaitView[] {
  const { nowMs } = input;
  const here = input.replicas.filter(
    (r) => r.state !== 'failed' && r.shards.some((s) => s.nodeId === input.nodeId && s.state !== 'stopped'),
  );
  return here.map((r): DrainWaitView => {
    const since = Math.max(0, Math.floor((nowMs - r.stateSinceMs) / 1000));
    const inFlight = input.inFlight?.(r.id);
    const base = {
      replica: r.id,
      model: r.model,
      state: r.state,
      since_seconds: since,
      ...(inFlight === undefined ? {} : { in_flight: inFlight }),
    };
    if (r.state === 'draining') {
      const left = Math.max(0, Math.ceil((input.drainDeadlineMs - (nowMs - r.stateSinceMs)) / 1000));
      const waits = inFlight
        ? `${inFlight} request${inFlight === 1 ? '' : 's'} in flight to finish; the drain deadline stops it in ${left} s regardless`
        : `the next reconciler pass to stop it: its replacement serves and nothing is in flight`;
      return { ...base, waits_for: waits, deadline_in_seconds: left };
    }
    if (r.state === 'stopping') return { ...base, waits_for: 'its engine to exit: the agent was told to stop it' };
    const replacement = input.replicas.find((x) => x.replaces === r.id && COUNTING_STATES.has(x.state));
    if (replacement) {
      const where = [...new Set(replacement.shards.map((s) => s.nodeId))].join(', ');
      return {
        ...base,
        replacement: replacement.id,
        replacement_state: replacement.state,
        waits_for: `its replacement ${replacement.id} on ${where} to be ready (it is ${replacement.state}); it keeps serving meanwhile`,
      };
    }
    const blocked = input.blockedDrains.find((b) => b.replicaId === r.id);
    if (blocked) {
      const rejections = input.rejections(r.model);
      const model = input.models.find((m) => m.name === r.model);
      const lines = rejections && model ? profileFits(model, rejections).map((p) => p.line) : [];
      return {
        ...base,
        waits_for: `a node to take its replacement, and none can: ${lines.length ? lines.join('; ') : `see llmgw ctl explain ${r.model}`}; it keeps serving meanwhile`,
      };
    }
    return {
      ...base,
      waits_for:
        'a replacement to be placed: at most a few replicas of one model move at a time, and the next reconciler pass places it',
    };
  });
}

/** The node page's summary: the drain first when it drains, then why it is idle. */
export function nodeSummary(
  nodeId: string,
  waits: readonly DrainWaitView[] | undefined,
  idle: NodeIdleView | undefined,
): string[] {
  const out: string[] = [];
  if (waits) {
    if (waits.length === 0) out.push(`node ${nodeId} is drained: no replica is left on it`);
    else out.push(`node ${nodeId} is draining and waits for ${waits.length} replica${waits.length === 1 ? '' : 's'}:`);
    for (const w of waits) out.push(`replica ${w.replica} (${w.model}, ${w.state}) waits for ${w.waits_for}`);
  }
  if (idle && !(waits && waits.length === 0)) out.push(`node ${nodeId} runs no replica:`, ...idle.reasons);
  else if (idle) out.push(...idle.reasons);
  return out;
}
