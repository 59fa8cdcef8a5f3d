// The reading commands: summary, nodes, node, models, model, replicas,
// explain, weights, events. Each fetches what it shows and renders it, or prints the
// API's JSON with -o json. None of them changes anything.
import {
  AdminApiError,
  type EventView,
  type ExplainView,
  type ModelView,
  type NodeDetailView,
  type NodeView,
  type OrphansView,
  type ReplicaView,
  type SummaryView,
} from '../api/index.js';
import { type CtlContext, EXIT } from './context.js';
import { bytesOrUnknown, formatGiB, formatSeconds, list, orUnknown, type Output, UNKNOWN } from './render.js';
import { renderLastCollect, renderModelWhy, renderNodeWhy } from './why.js';
import { shadowText, splitText } from './shadows.js';
import { remoteText } from './remote-text.js';

export async function summary(ctx: CtlContext): Promise<number> {
  const s = await ctx.client.summary();
  if (ctx.json) ctx.out.json(s);
  else renderSummary(ctx.out, s);
  return EXIT.ok;
}

export function renderSummary(out: Output, s: SummaryView): void {
  const counts = (r: Record<string, number>) =>
    Object.entries(r)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([k, v]) => `${out.state(k)} ${v}`)
      .join(', ') || 'none';
  out.line(
    `${out.heading('models')}    ${s.models.total} (${s.models.stored} stored, ${s.models.from_file} from the catalog file)${s.models.not_placed.length ? `; not placed: ${out.c.red(s.models.not_placed.join(', '))}` : ''}`,
  );
  out.line(`${out.heading('nodes')}     ${s.nodes.total}: ${counts(s.nodes.by_state)}; ${counts(s.nodes.by_liveness)}`);
  out.line(`${out.heading('replicas')}  ${s.replicas.total}: ${counts(s.replicas.by_state)}`);
  out.line(
    `${out.heading('store')}     ${s.store ? 'yes' : out.c.yellow('none: models come only from the catalog file')}`,
  );
  if (s.attention.length === 0) {
    out.line(`${out.heading('attention')} nothing needs a person`);
    return;
  }
  out.line(`${out.heading('attention')} ${s.attention.length}`);
  for (const a of s.attention) out.line(`  ${out.c.yellow('!')} ${a.replace(/\n/g, '\n    ')}`);
}

/** What `ctl nodes` was asked for: filters passed to the API as they are, and the page. */
export interface NodesOptions {
  state?: string[];
  labels?: string[];
  q?: string;
  /** Absent = every node in one answer (--all). */
  limit?: number;
  after?: string;
}

export async function nodes(ctx: CtlContext, o: NodesOptions = {}): Promise<number> {
  const page = await ctx.client.nodesPage(o);
  const ns = page.nodes;
  const filtered = !!(o.state?.length || o.labels?.length || o.q || o.after);
  // A control plane older than the node list's filters ignores them and sends every node: say so rather than pass it off as the answer.
  if (page.total === null && filtered)
    ctx.warn(
      'llmgw ctl: this control plane does not filter or page the node list (it is older than this ctl); showing every node',
    );
  const more =
    page.total !== null && page.next !== null
      ? `showing ${ns.length} of ${page.total} nodes; ${howToGetMore(o, page.next)}`
      : null;
  if (ctx.json) {
    ctx.out.json(ns);
    if (more) ctx.warn(more);
    return EXIT.ok;
  }
  if (ns.length === 0) {
    ctx.out.line(
      filtered && page.total !== null
        ? 'no node matches'
        : 'no node has joined yet: start `llmgw agent --control <agent url> --join-token-file …` on a machine',
    );
    return EXIT.ok;
  }
  ctx.out.line(
    ctx.out.table(
      [
        'NODE',
        'STATE',
        'LIVENESS',
        'GPUS FREE',
        'GPU CLASS',
        'RAM FREE',
        'DISK FREE',
        'REPLICAS',
        'LAST SEEN',
        'AGENT',
      ],
      ns.map((n) => [
        n.id,
        stateCell(ctx.out, n),
        ctx.out.state(n.liveness),
        gpuCell(ctx.out, n),
        list(n.gpu_classes),
        ramCell(n),
        diskCell(n),
        String(n.replicas),
        n.last_seen_ago ? `${n.last_seen_ago} ago` : 'never',
        orUnknown(n.agent_version),
      ]),
    ),
  );
  if (more) ctx.out.line(more);
  else if (page.total !== null && (filtered || o.limit !== undefined))
    ctx.out.line(`showing ${ns.length} of ${page.total} node${page.total === 1 ? '' : 's'}`);
  return EXIT.ok;
}

/** The commands that show the rest: the next page with the same filters, or all of it. */
function howToGetMore(o: NodesOptions, next: string): string {
  const filters = [
    ...(o.state?.length ? [`--state ${o.state.join(',')}`] : []),
    ...(o.labels ?? []).map((l) => `--label ${l}`),
    ...(o.q ? [`-q ${o.q}`] : []),
  ].join(' ');
  const base = `llmgw ctl nodes${filters ? ` ${filters}` : ''}`;
  return `next page: ${base} --after ${next}${o.limit === undefined ? '' : ` --limit ${o.limit}`}; every one: ${base} --all`;
}

/** The admin state, and what holds the node back: a blocked drain, a pending approval, changed GPUs. */
function stateCell(out: Output, n: NodeView): string {
  const marks = [
    ...(n.drain_blocked?.length ? [out.c.red('(blocked)')] : []),
    ...(n.approval === 'pending' ? [out.c.yellow('(pending approval)')] : []),
    ...(n.hardware_change ? [out.c.yellow('(GPUs changed)')] : []),
  ];
  return [out.state(n.state), ...marks].join(' ');
}

/** "8/8", "6/8 (1 unhealthy)", or "unknown" when the GPU probe failed. */
function gpuCell(out: Output, n: NodeView): string {
  if (n.gpu_probe_error) return out.c.red('unknown');
  const unhealthy = n.unhealthy_gpus?.length ?? 0;
  return `${n.gpu_free}/${n.gpu_total}${unhealthy ? ` ${out.c.red(`(${unhealthy} unhealthy)`)}` : ''}`;
}

/** "1900/2048 GiB" free of total; the total alone when free is not reported. */
function ramCell(n: NodeView): string {
  if (n.memory_gb === undefined) return UNKNOWN;
  return n.memory_free_gb === undefined ? `${UNKNOWN}/${n.memory_gb} GiB` : `${n.memory_free_gb}/${n.memory_gb} GiB`;
}

function diskCell(n: NodeView): string {
  return n.disk_total_gb === undefined ? UNKNOWN : `${n.disk_free_gb ?? UNKNOWN}/${n.disk_total_gb} GiB`;
}

export async function node(ctx: CtlContext, id: string): Promise<number> {
  const detail = await nodeDetail(ctx, id);
  if (!detail) return EXIT.failed;
  const n = detail.node;
  const orphans = await ctx.client.orphans({ node: id });
  const here = detail.replicas;
  if (ctx.json) {
    ctx.out.json({
      ...detail,
      orphans: orphans.nodes.find((o) => o.node === id) ?? { node: id, entries: [], reclaimable_bytes: 0 },
    });
    return EXIT.ok;
  }
  const out = ctx.out;
  out.line(
    `${out.heading(`node ${n.id}`)}  state ${out.state(n.state)}, ${out.state(n.liveness)}, last seen ${n.last_seen_ago ? `${n.last_seen_ago} ago` : 'never'}`,
  );
  renderNodeWhy(out, detail);
  for (const b of n.drain_blocked ?? []) out.line(`  ${out.c.red('drain blocked')}: ${b}`);
  out.line(`  hostname  ${orUnknown(n.hostname)}`);
  out.line(`  mgmt      ${orUnknown(n.mgmt_addr)}`);
  out.line(`  agent     ${orUnknown(n.agent_version)}`);
  out.line(
    `  labels    ${
      n.labels && Object.keys(n.labels).length
        ? Object.entries(n.labels)
            .map(([k, v]) => `${k}=${v}`)
            .join(', ')
        : UNKNOWN
    }`,
  );
  out.line(`  fabrics   ${list(n.fabrics)}`);
  out.line(
    `  RAM       ${n.memory_gb === undefined ? `${UNKNOWN} (not reported)` : `${n.memory_free_gb ?? UNKNOWN} GiB available of ${formatGiB(n.memory_gb)}`}`,
  );
  out.line(
    `  disk      ${n.disk_total_gb === undefined ? `${UNKNOWN} (not reported)` : `${n.disk_free_gb ?? UNKNOWN} GiB free of ${n.disk_total_gb} GiB (local filesystems, summed)`}`,
  );
  out.line();
  if (n.gpu_probe_error) {
    out.line(`${out.heading('GPUs')} unknown: ${out.c.red(n.gpu_probe_error)}`);
  } else if (n.gpu_total === 0) {
    out.line(`${out.heading('GPUs')} none (a CPU node)`);
  } else {
    out.line(`${out.heading('GPUs')} ${n.gpu_free} free of ${n.gpu_total}`);
    const problems = new Map<number, string>();
    for (const u of n.unhealthy_gpus ?? []) {
      const m = /^gpu (\d+): (.*)$/s.exec(u);
      if (m) problems.set(Number(m[1]), m[2]!);
    }
    const users = new Map<number, string[]>();
    for (const r of here)
      for (const s of r.shards)
        if (s.node === id && s.state !== 'stopped')
          for (const g of s.gpus) users.set(g, [...(users.get(g) ?? []), `${r.id} (${r.model})`]);
    // The view names classes per node, not per GPU: a single class is every GPU's, several leave each unknown.
    const cls = n.gpu_classes?.length === 1 ? n.gpu_classes[0]! : UNKNOWN;
    out.line(
      out.table(
        ['GPU', 'CLASS', 'HEALTH', 'IN USE BY'],
        Array.from({ length: n.gpu_total }, (_, i) => [
          String(i),
          cls,
          problems.has(i) ? out.c.red(`unhealthy: ${problems.get(i)}`) : out.state('ok'),
          users.get(i)?.join(', ') ?? UNKNOWN,
        ]),
      ),
    );
  }
  out.line();
  out.line(`${out.heading('weights on disk')} ${n.models_on_disk?.length ?? 'none reported'}`);
  const orphanOf = new Map((orphans.nodes.find((o) => o.node === id)?.entries ?? []).map((e) => [e.path, e]));
  for (const p of n.models_on_disk ?? []) {
    const o = orphanOf.get(p);
    out.line(
      `  ${p}${o ? `  ${out.c.yellow(`orphan, ${bytesOrUnknown(o.size_bytes)}: no model wants it (\`llmgw ctl weights --collect --node ${id}\`)`)}` : ''}`,
    );
  }
  out.line();
  out.line(`${out.heading('replicas on this node')} ${here.length || 'none'}`);
  if (here.length) out.line(replicaTable(out, here, id));
  return EXIT.ok;
}

/**
 * GET /api/v1/nodes/{id}; from a control plane older than that endpoint, the
 * node out of the list with its replicas and no "why". Null after saying
 * that no node has the id.
 */
async function nodeDetail(ctx: CtlContext, id: string): Promise<NodeDetailView | null> {
  try {
    return await ctx.client.node(id);
  } catch (err) {
    if (!(err instanceof AdminApiError) || err.status !== 404) throw err;
  }
  const [ns, reps] = await Promise.all([ctx.client.nodes(), ctx.client.replicas()]);
  const n = ns.find((x) => x.id === id);
  if (!n) {
    ctx.warn(
      `no node "${id}"; \`llmgw ctl nodes\` lists them${
        ns.length
          ? ` (${ns
              .map((x) => x.id)
              .slice(0, 10)
              .join(', ')})`
          : ''
      }`,
    );
    return null;
  }
  return { node: n, replicas: reps.filter((r) => r.shards.some((s) => s.node === id)), summary: [] };
}

export async function models(ctx: CtlContext): Promise<number> {
  const ms = await ctx.client.models();
  if (ctx.json) {
    ctx.out.json(ms);
    return EXIT.ok;
  }
  if (ms.length === 0) {
    ctx.out.line('no model in the catalog: `llmgw ctl models add FILE` adds one');
    return EXIT.ok;
  }
  ctx.out.line(
    ctx.out.table(
      ['MODEL', 'READY', 'WANTED', 'PROFILES', 'SOURCE', 'FROM', 'ALIASES', 'FALLBACKS'],
      ms.map((m) => [
        m.name,
        readyCell(ctx.out, m),
        wanted(m),
        m.profiles.join(', '),
        m.source,
        orUnknown(m.origin),
        list(m.aliases),
        list(m.fallbacks),
      ]),
    ),
  );
  return EXIT.ok;
}

/** ready/total, red when the model wants replicas and has none ready. */
function readyCell(out: Output, m: ModelView): string {
  const s = `${m.ready_replicas}/${m.total_replicas}`;
  if (m.min_replicas > 0 && m.ready_replicas === 0) return out.c.red(s);
  if (m.ready_replicas < m.min_replicas) return out.c.yellow(s);
  return out.c.green(s);
}

function wanted(m: ModelView): string {
  return m.min_replicas === m.max_replicas ? String(m.min_replicas) : `${m.min_replicas}-${m.max_replicas}`;
}

export async function model(ctx: CtlContext, name: string): Promise<number> {
  const ms = await ctx.client.models();
  const m = ms.find((x) => x.name === name) ?? ms.find((x) => x.aliases?.includes(name));
  if (!m) {
    ctx.warn(`no model "${name}" in the catalog; \`llmgw ctl models\` lists them`);
    return EXIT.failed;
  }
  const [reps, why] = await Promise.all([ctx.client.replicas({ model: m.name }), ctx.client.explain(m.name)]);
  if (ctx.json) {
    ctx.out.json({ model: m, replicas: reps, explain: why });
    return EXIT.ok;
  }
  const out = ctx.out;
  out.line(`${out.heading(`model ${m.name}`)}  ${readyCell(out, m)} ready, wants ${wanted(m)}`);
  out.line(`  source     ${m.source}`);
  out.line(
    `  from       ${m.origin === 'file' ? 'the catalog file (read-only through the API)' : m.origin === 'store' ? 'the store (added through the API)' : UNKNOWN}`,
  );
  out.line(`  aliases    ${list(m.aliases)}`);
  out.line(`  fallbacks  ${list(m.fallbacks)}`);
  // Only for a model that has them: the lines every other model prints stay as they were.
  if (m.split?.length) out.line(`  split      ${splitText(m)}`);
  if (m.shadow) out.line(`  shadow     ${shadowText(m)}  (\`llmgw ctl shadows\` compares them)`);
  if (m.remote) out.line(`  remote     ${remoteText(m.remote)}`);
  out.line(`  profiles   ${m.profiles.map((p, i) => `${i + 1}. ${p}`).join('  ')}  (tried in this order)`);
  out.line(`  endpoints  ${list(m.endpoints)}`);
  out.line();
  out.line(`${out.heading('replicas')} ${reps.length || 'none'}`);
  if (reps.length) out.line(replicaTable(out, reps));
  if (why.rejections?.length || why.not_running?.length || (why.summary?.length && !why.placed)) {
    out.line();
    renderExplain(out, why);
  }
  return EXIT.ok;
}

export async function replicas(ctx: CtlContext, modelName?: string): Promise<number> {
  const reps = await ctx.client.replicas(modelName ? { model: modelName } : {});
  if (ctx.json) {
    ctx.out.json(reps);
    return EXIT.ok;
  }
  if (reps.length === 0) {
    ctx.out.line(modelName ? `no replica of ${modelName}` : 'no replica');
    return EXIT.ok;
  }
  ctx.out.line(replicaTable(ctx.out, reps));
  return EXIT.ok;
}

/** One row per replica; `onNode` limits the shard column to that node's shards. */
export function replicaTable(out: Output, reps: readonly ReplicaView[], onNode?: string): string {
  return out.table(
    [
      'REPLICA',
      'MODEL',
      'PROFILE',
      'STATE',
      'SHARDS',
      'AGE',
      'IDLE',
      'WAIT/RUN',
      'KV',
      'CACHE HIT',
      'ENDPOINT / ERROR',
    ],
    reps.map((r) => [
      r.id,
      r.model,
      r.profile,
      out.state(r.state),
      r.shards
        .filter((s) => !onNode || s.node === onNode)
        .map(
          (s) =>
            `${s.rank}: ${s.node}${s.gpus.length ? ` gpu ${s.gpus.join(',')}` : ''} ${out.state(s.state)}${s.fetch ? ` ${fetchCell(s.fetch)}` : ''}`,
        )
        .join('\n') || UNKNOWN,
      formatSeconds(r.age_seconds),
      // -1: the router has reported no use, which is not "idle for 0s".
      r.idle_seconds < 0 ? 'unknown' : formatSeconds(r.idle_seconds),
      // The engine's own queue: waiting for a sequence / generating. Not reported: the house's unknown mark.
      r.load ? `${r.load.waiting}/${r.load.running}` : UNKNOWN,
      r.load?.kv_usage === undefined ? UNKNOWN : `${Math.round(r.load.kv_usage * 100)}%`,
      // The prefix cache's recent hit rate; an engine that reports none (llama.cpp) is unknown, not 0%.
      r.load?.cache_hit_rate === undefined ? UNKNOWN : `${Math.round(r.load.cache_hit_rate * 100)}%`,
      // The first line: the client shows a multi-line error's newlines as "\n" (render.ts sanitize), so cut at that.
      r.error ? out.c.red(r.error.split(/\n|\\n/)[0]!) : orUnknown(r.endpoint),
    ]),
  );
}

/** Cells of a fetch progress bar in a table; a listing redrawn by --watch, where one live bar per fetch would not fit. */
const FETCH_BAR_CELLS = 10;

export function fetchCell(f: NonNullable<ReplicaView['shards'][number]['fetch']>): string {
  // Unknown size: no bar and no percent, never a bar stuck at 0.
  const filled =
    f.percent === undefined
      ? null
      : Math.max(0, Math.min(FETCH_BAR_CELLS, Math.round((f.percent / 100) * FETCH_BAR_CELLS)));
  const bar = filled === null ? '' : `[${'#'.repeat(filled)}${'-'.repeat(FETCH_BAR_CELLS - filled)}] `;
  const pct = f.percent === undefined ? '' : `${bar}${f.percent}% `;
  return `${pct}${bytesOrUnknown(f.bytes_done)} of ${bytesOrUnknown(f.total_bytes)}${f.bytes_per_second ? ` at ${bytesOrUnknown(f.bytes_per_second)}/s` : ''}`;
}

export async function explain(ctx: CtlContext, name: string): Promise<number> {
  const why = await ctx.client.explain(name);
  if (ctx.json) ctx.out.json(why);
  else renderExplain(ctx.out, why);
  // 3 only when placement was tried and nothing fit; a model placed, or never tried, is not a failure to explain.
  return !why.placed && why.rejections?.length ? EXIT.noFit : EXIT.ok;
}

export function renderExplain(out: Output, why: ExplainView): void {
  if (why.summary?.length) {
    // The cause in words first; the per-node rejections are the numbers behind it.
    renderModelWhy(out, why);
    if (why.rejections?.length) {
      out.line();
      out.line(out.heading('rejections, node by node'));
      out.line(
        out.table(
          ['PROFILE', 'POOL', 'NODE', 'REASON'],
          why.rejections.map((r) => [r.profile, orUnknown(r.pool), orUnknown(r.node), r.reason]),
        ),
      );
    }
    return;
  }
  if (!why.rejections?.length) {
    out.line(
      why.placed
        ? `model ${why.model} is ${out.state('placed')}: it has replicas, and the last placement pass rejected nothing`
        : `model ${why.model} has no replica, and no placement attempt failed: it wants none (min 0), or the reconciler has not run yet`,
    );
    return;
  }
  out.line(
    why.placed
      ? `model ${why.model} is ${out.state('placed')}, but the last pass could not place every replica it wanted:`
      : `model ${why.model} is ${out.c.red('not placed')}: no node can run any of its profiles now. Rejections:`,
  );
  out.line(
    out.table(
      ['PROFILE', 'POOL', 'NODE', 'REASON'],
      why.rejections.map((r) => [r.profile, orUnknown(r.pool), orUnknown(r.node), r.reason]),
    ),
  );
}

export async function weights(ctx: CtlContext, nodeId?: string): Promise<number> {
  const o = await ctx.client.orphans(nodeId ? { node: nodeId } : {});
  if (ctx.json) ctx.out.json(o);
  else {
    renderOrphans(ctx.out, o, nodeId);
    if (o.last_collect !== undefined) ctx.out.line();
    renderLastCollect(ctx.out, o);
  }
  return EXIT.ok;
}

export function renderOrphans(out: Output, o: OrphansView, nodeId?: string): void {
  if (o.nodes.length === 0) {
    out.line(`no weights that no model wants${nodeId ? ` on ${nodeId}` : ''}: nothing to collect`);
    return;
  }
  const rows: string[][] = [];
  let unsized = 0;
  let entries = 0;
  for (const n of o.nodes) {
    for (const e of n.entries) {
      entries++;
      if (e.size_bytes === undefined) unsized++;
      rows.push([
        n.node,
        e.path,
        bytesOrUnknown(e.size_bytes),
        e.last_used_ms === undefined ? UNKNOWN : new Date(e.last_used_ms).toISOString().replace(/\.\d+Z$/, 'Z'),
        orUnknown(e.source),
      ]);
    }
  }
  out.line(out.table(['NODE', 'PATH', 'SIZE', 'LAST USED', 'SOURCE'], rows));
  for (const n of o.nodes)
    out.line(`node ${n.node}: ${n.entries.length} orphan(s), ${bytesOrUnknown(n.reclaimable_bytes)}`);
  out.line(
    `total: ${bytesOrUnknown(o.total_bytes)}${unsized ? ` or more (${unsized} of ${entries} entries did not report a size)` : ''} in ${entries} orphan(s) on ${o.nodes.length} node(s); \`llmgw ctl weights --collect\` asks the nodes to remove them`,
  );
}

/** How often `events --watch` asks for newer events, ms. */
const EVENTS_FOLLOW_MS = 2000;

/**
 * The events log, oldest at the top so the newest is next to the prompt (the
 * API answers newest first). With `follow`, keeps asking for events newer
 * than the last one shown and prints each as a line (as JSON lines with -o
 * json) until Ctrl-C.
 */
export async function events(
  ctx: CtlContext,
  o: { model?: string; limit?: number; follow?: boolean },
): Promise<number> {
  const filter = { ...(o.model ? { model: o.model } : {}) };
  const first = await ctx.client.events({ ...filter, ...(o.limit === undefined ? {} : { limit: o.limit }) });
  const shown = [...first.events].reverse();
  if (!o.follow) {
    if (ctx.json) ctx.out.json(first);
    else if (shown.length === 0) ctx.out.line(o.model ? `no event for ${o.model}` : 'no event yet');
    else ctx.out.line(eventTable(ctx.out, shown));
    return EXIT.ok;
  }
  let lastId = 0;
  const print = (list: readonly EventView[]) => {
    for (const e of list) {
      lastId = Math.max(lastId, e.id);
      if (ctx.json) ctx.out.jsonLine(e);
      else ctx.out.line(eventLine(ctx.out, e));
    }
  };
  print(shown);
  while (await ctx.pause(EVENTS_FOLLOW_MS)) {
    try {
      const next = await ctx.client.events({ ...filter, limit: 1000, after: lastId });
      print([...next.events].reverse());
    } catch (err) {
      // One failed round (a restarting control plane) is said and the next one tried, as --watch does elsewhere.
      ctx.warn(`llmgw ctl events: ${(err as Error).message}; trying again`);
    }
  }
  return EXIT.ok;
}

export function eventTable(out: Output, list: readonly EventView[]): string {
  return out.table(
    ['TIME', 'KIND', 'MODEL', 'NODE', 'CHANGE', 'MESSAGE'],
    list.map((e) => [
      shortTime(e.at),
      eventKind(out, e.kind),
      orUnknown(e.model),
      orUnknown(e.node),
      change(e),
      e.message,
    ]),
  );
}

function eventLine(out: Output, e: EventView): string {
  const subject = [e.model, e.node].filter(Boolean).join(' ');
  return `${shortTime(e.at)}  ${eventKind(out, e.kind)}  ${subject ? `${subject}  ` : ''}${e.from !== undefined || e.to !== undefined ? `${change(e)}  ` : ''}${e.message}`;
}

/** "3 → 5" for a scaling decision; "-" for the rest. */
function change(e: EventView): string {
  return e.from === undefined && e.to === undefined ? UNKNOWN : `${e.from ?? UNKNOWN} → ${e.to ?? UNKNOWN}`;
}

function eventKind(out: Output, kind: string): string {
  if (kind === 'node_lost' || kind === 'replica_failed' || kind === 'replica_lost' || kind === 'placement_failed')
    return out.c.red(kind);
  if (kind === 'node_stale' || kind === 'drain' || kind === 'node_pending' || kind === 'node_hardware_changed')
    return out.c.yellow(kind);
  if (kind === 'replica_ready' || kind === 'node_back') return out.c.green(kind);
  return kind;
}

/** "2026-05-01 12:03:04" in UTC: what an operator lines up with other logs. */
function shortTime(iso: string): string {
  return iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}
