// Turning a failed placement's rejections into what an operator reads: one
// line per profile the way Kubernetes words an unschedulable pod ("0/12
// nodes fit profile h100-tp2: 7 have fewer than 2 free h100-80gb GPUs, 3 are
// cordoned"), the notes on checks that could not be made, and a per-node
// drill-down. Separate from placement because it runs when someone asks, on
// rejections the reconciler kept, not on every pass.
import type { PlacementNote, PlacementProfile, Rejection, RejectionCode } from './types.js';
import { formatBytes, gpuNoun, plural } from './wording.js';

export interface ExplainOptions {
  /** Nodes in the snapshot the rejections came from: the denominator of "0/12 nodes fit". */
  readonly nodeCount: number;
  /** The model's profiles, for their order and to word GPU clauses; absent = order of first appearance, plainer wording. */
  readonly profiles?: readonly PlacementProfile[];
  readonly notes?: readonly PlacementNote[];
}

export interface ExplainClause {
  readonly code: RejectionCode;
  /** Nodes with this code; a node failing several checks counts once under each. */
  readonly count: number;
  readonly text: string;
}

export interface ExplainProfile {
  readonly profile: string;
  readonly pool?: string;
  /** Nodes with no rejection for this profile (a multi-node profile may still fail on fabrics). */
  readonly nodesFit: number;
  readonly nodeCount: number;
  /** Count descending, then in check order. */
  readonly clauses: readonly ExplainClause[];
  /** Reasons about the profile as a whole (an invalid pool) or about fabrics. */
  readonly other: readonly string[];
  readonly line: string;
}

export interface ExplainNode {
  readonly node: string;
  /** This node's rejections, every profile, in the order given. */
  readonly rejections: readonly Rejection[];
}

export interface ExplainSummary {
  readonly model: string;
  readonly profiles: readonly ExplainProfile[];
  /** Node id order. */
  readonly nodes: readonly ExplainNode[];
  readonly notes: readonly string[];
  /** The profile lines, then the notes, one per line. */
  readonly text: string;
}

/** The seed's wire form of a rejection (adminapi RejectionView). */
export interface RejectionView {
  readonly profile: string;
  readonly pool?: string;
  readonly node?: string;
  readonly reason: string;
}

/** Check order, for ties in the summary and the drill-down. */
const CODE_ORDER: readonly RejectionCode[] = [
  'pool_invalid',
  'excluded',
  'cordoned',
  'pending_approval',
  'draining',
  'stale',
  'lost',
  'pool_mismatch',
  'engine_missing',
  'gpus_unknown',
  'no_gpus',
  'gpu_class',
  'gpu_memory',
  'gpu_unhealthy',
  'gpus_free',
  'ram',
  'disk',
  'no_fabric',
  'fabric',
];
const CODE_RANK = new Map(CODE_ORDER.map((c, i) => [c, i]));

export function toRejectionViews(rejections: readonly Rejection[]): RejectionView[] {
  return rejections.map((r) => ({
    profile: r.profile,
    ...(r.pool === undefined ? {} : { pool: r.pool }),
    ...(r.node === undefined ? {} : { node: r.node }),
    reason: r.reason,
  }));
}

export function explain(model: string, rejections: readonly Rejection[], options: ExplainOptions): ExplainSummary {
  const order: string[] = (options.profiles ?? []).map((p) => p.name);
  const byProfile = new Map<string, Rejection[]>();
  for (const name of order) byProfile.set(name, []);
  for (const r of rejections) {
    let list = byProfile.get(r.profile);
    if (!list) {
      byProfile.set(r.profile, (list = []));
      order.push(r.profile);
    }
    list.push(r);
  }

  const profiles = order.map((name) =>
    summariseProfile(
      name,
      byProfile.get(name)!,
      options.nodeCount,
      options.profiles?.find((p) => p.name === name),
    ),
  );
  const notes = (options.notes ?? []).map((n) => n.text);
  return {
    model,
    profiles,
    nodes: drillDown(rejections),
    notes,
    text: [
      ...(profiles.length === 0 ? [`model ${model} has no profiles to place`] : profiles.map((p) => p.line)),
      ...notes,
    ].join('\n'),
  };
}

function summariseProfile(
  name: string,
  rejections: readonly Rejection[],
  nodeCount: number,
  profile: PlacementProfile | undefined,
): ExplainProfile {
  const nodesByCode = new Map<RejectionCode, Set<string>>();
  const rejected = new Set<string>();
  const first = new Map<RejectionCode, Rejection>();
  const other: string[] = [];
  let pool = profile?.pool;
  for (const r of rejections) {
    pool ??= r.pool;
    if (r.node === undefined) {
      other.push(r.reason);
      continue;
    }
    rejected.add(r.node);
    let nodes = nodesByCode.get(r.code);
    if (!nodes) {
      nodesByCode.set(r.code, (nodes = new Set()));
      first.set(r.code, r);
    }
    nodes.add(r.node);
  }
  const clauses: ExplainClause[] = [...nodesByCode]
    .map(([code, nodes]) => ({ code, count: nodes.size, text: clause(code, nodes.size, first.get(code)!, profile) }))
    .sort((a, b) => b.count - a.count || CODE_RANK.get(a.code)! - CODE_RANK.get(b.code)!);
  const nodesFit = Math.max(0, nodeCount - rejected.size);

  let line: string;
  const invalid = rejections.find((r) => r.code === 'pool_invalid');
  if (invalid) {
    line = `profile ${name} cannot be placed on any node: ${invalid.reason}`;
  } else if (nodeCount === 0) {
    line = `0/0 nodes fit profile ${name}: no node has joined`;
  } else {
    line = `${nodesFit}/${nodeCount} nodes fit profile ${name}`;
    const parts = clauses.map((c) => c.text).join(', ');
    if (parts) line += `: ${parts}`;
    if (other.length > 0) line += `${parts ? '; ' : ': '}${other.join('; ')}`;
  }
  return { profile: name, ...(pool === undefined ? {} : { pool }), nodesFit, nodeCount, clauses, other, line };
}

/** The Kubernetes-style clause for `count` nodes failing one check, e.g. "3 are cordoned". */
function clause(code: RejectionCode, count: number, sample: Rejection, profile: PlacementProfile | undefined): string {
  const n = String(count);
  const isAre = plural(count, 'is', 'are');
  const hasHave = plural(count, 'has', 'have');
  const wanted = sample.requested ?? profile?.gpus ?? 1;
  const fewer = (adjective: string, withMemory = true): string =>
    wanted === 1
      ? `${n} ${hasHave} no ${gpuNoun(profile, 1, adjective, withMemory)}`
      : `${n} ${hasHave} fewer than ${wanted} ${gpuNoun(profile, wanted, adjective, withMemory)}`;
  switch (code) {
    case 'excluded':
      return `${n} ${isAre} excluded`;
    case 'cordoned':
      return `${n} ${isAre} cordoned`;
    case 'draining':
      return `${n} ${isAre} draining`;
    case 'pending_approval':
      return `${n} ${plural(count, 'waits', 'wait')} for approval`;
    case 'stale':
      return `${n} ${plural(count, 'has', 'have')} not reported recently`;
    case 'lost':
      return `${n} ${isAre} lost`;
    case 'pool_mismatch':
      return `${n} ${isAre} not in pool ${sample.pool ?? profile?.pool ?? ''}`.trimEnd();
    case 'engine_missing':
      return `${n} ${plural(count, 'lacks', 'lack')} engine ${profile?.engine ?? 'the profile asks for'}`;
    case 'gpus_unknown':
      return `${n} did not report ${plural(count, 'its', 'their')} GPUs`;
    case 'no_gpus':
      return `${n} ${hasHave} no GPUs`;
    case 'gpu_class':
      return fewer('', false);
    case 'gpu_memory':
      return fewer('');
    case 'gpu_unhealthy':
      return fewer('healthy');
    case 'gpus_free':
      return fewer('free');
    case 'ram':
      return `${n} ${plural(count, 'lacks', 'lack')} ${sizeOf(sample, profile?.memoryGiB)} of free RAM`;
    case 'disk':
      return `${n} ${plural(count, 'lacks', 'lack')} ${sizeOf(sample, profile?.diskGiB)} of local disk`;
    case 'no_fabric':
      return `${n} ${plural(count, 'fits', 'fit')} alone but ${isAre} on no fabric`;
    case 'pool_invalid':
    case 'fabric':
      return `${n}: ${sample.reason}`;
  }
}

function sizeOf(sample: Rejection, gib: number | undefined): string {
  if (sample.requested !== undefined) return formatBytes(sample.requested);
  return gib === undefined ? 'the space asked for' : `${gib} GiB`;
}

function drillDown(rejections: readonly Rejection[]): ExplainNode[] {
  const byNode = new Map<string, Rejection[]>();
  for (const r of rejections) {
    if (r.node === undefined) continue;
    const list = byNode.get(r.node);
    if (list) list.push(r);
    else byNode.set(r.node, [r]);
  }
  const nodes = [...byNode.keys()];
  // Rejections from place() come in node order already; sorting is then only a check.
  let sorted = true;
  for (let i = 1; i < nodes.length && sorted; i++) sorted = nodes[i - 1]! < nodes[i]!;
  if (!sorted) nodes.sort();
  return nodes.map((node) => ({ node, rejections: byNode.get(node)! }));
}
