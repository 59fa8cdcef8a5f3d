// Four of the operator's questions, one command each, every answer naming
// its cause in words with the numbers behind it:
//   `request ID` / `requests`: which replica served this request, and why it failed;
//   `disk NODE`: where this node's disk went;
//   `audit`: what changed and who did it;
//   `plan FILE`: will this new model fit, and where.
// Apart from read.ts because each is a question, not a listing of one kind
// of thing; none of them changes anything.
import type {
  AuditEntryView,
  DiskUseView,
  DiskWeightsView,
  ModelPlanView,
  NodeDisksView,
  RequestEventView,
  RequestRecordView,
} from '../api/index.js';
import { type CtlContext, EXIT } from './context.js';
import { readModelFile } from './model-file.js';
import { bytesOrUnknown, type Output, UNKNOWN } from './render.js';
import { renderTimeline } from './request-story.js';

export async function request(ctx: CtlContext, id: string): Promise<number> {
  const r = await ctx.client.request(id);
  if (ctx.json) ctx.out.json(r);
  else renderRequest(ctx.out, r);
  return EXIT.ok;
}

/**
 * One request: the verdict first (who served it, or why nobody did), then
 * its timeline when the server sent one (GET /api/v1/requests/{id} does),
 * else the table of attempts.
 */
export function renderRequest(out: Output, r: RequestRecordView & { timeline?: RequestEventView[] }): void {
  const ok = r.outcome === 'ok';
  out.line(`${out.heading('request')}   ${r.id}  ${r.at}`);
  if (r.same_id)
    out.line(
      out.c.yellow(
        `  ${r.same_id} earlier request(s) in the log carried this id too; this is the newest (GET /api/v1/requests?id=${r.id} lists them)`,
      ),
    );
  out.line(
    `${out.heading('model')}     ${r.model}  ${r.endpoint}${r.stream ? ' (stream)' : ''}${r.key ? `  key ${r.key}…` : ''}`,
  );
  out.line(`${out.heading('status')}    ${ok ? out.c.green(String(r.status)) : out.c.red(`${r.status} ${r.outcome}`)}`);
  if (r.replica)
    out.line(
      `${out.heading('served by')} replica ${r.replica}${r.nodes?.length ? ` on ${r.nodes.join(', ')}` : ''}${r.fallback ? ` (fallback ${r.fallback})` : ''}`,
    );
  else out.line(`${out.heading('served by')} no replica`);
  if (r.cause) out.line(`${out.heading('cause')}     ${out.c.red(r.cause)}`);
  const times = [`${r.duration_ms} ms in all`];
  if (r.held_ms !== undefined) times.push(`${r.held_ms} ms waiting for a replica to start`);
  if (r.ttft_ms !== undefined) times.push(`first byte after ${r.ttft_ms} ms`);
  out.line(`${out.heading('time')}      ${times.join(', ')}`);
  if (r.prompt_tokens !== undefined || r.completion_tokens !== undefined)
    out.line(
      `${out.heading('tokens')}    ${r.prompt_tokens ?? UNKNOWN} prompt, ${r.completion_tokens ?? UNKNOWN} completion`,
    );
  if (r.timeline) {
    renderTimeline(out, r.timeline, r.trace_id);
    return;
  }
  if (r.attempts.length === 0) {
    out.line(`${out.heading('attempts')}  none: no replica was tried`);
    return;
  }
  out.line(`${out.heading('attempts')}  ${r.attempts.length}`);
  out.line(
    out.table(
      ['#', 'MODEL', 'REPLICA', 'NODES', 'OUTCOME', 'MS', 'REASON'],
      r.attempts.map((a, i) => [
        String(i + 1),
        a.model,
        a.replica,
        a.nodes?.join(',') ?? UNKNOWN,
        a.outcome === 'answered' ? out.c.green('answered') : out.c.red('failed'),
        String(a.duration_ms),
        a.reason ?? UNKNOWN,
      ]),
    ),
  );
}

export async function requests(
  ctx: CtlContext,
  o: { id?: string; model?: string; status?: number; failed?: boolean; limit?: number },
): Promise<number> {
  const v = await ctx.client.requests(o);
  if (ctx.json) {
    ctx.out.json(v);
    return EXIT.ok;
  }
  const scope = `this control plane (${v.instance}) keeps the last ${v.capacity} requests in memory; it holds ${v.kept}`;
  if (v.requests.length === 0) {
    ctx.out.line(`no request matches; ${scope}`);
    return EXIT.ok;
  }
  ctx.out.line(
    ctx.out.table(
      ['TIME', 'REQUEST', 'MODEL', 'STATUS', 'REPLICA', 'NODES', 'ATTEMPTS', 'MS', 'CAUSE'],
      v.requests.map((r) => [
        r.at.replace(/^.*T/, '').replace(/Z$/, ''),
        r.id,
        r.model,
        r.outcome === 'ok' ? String(r.status) : ctx.out.c.red(`${r.status} ${r.outcome}`),
        r.replica ?? UNKNOWN,
        r.nodes?.join(',') ?? UNKNOWN,
        String(r.attempts.length),
        String(r.duration_ms),
        r.cause ?? '',
      ]),
    ),
  );
  ctx.out.line(ctx.out.c.dim(scope));
  return EXIT.ok;
}

export async function disk(ctx: CtlContext, node: string): Promise<number> {
  const v = await ctx.client.nodeDisks(node);
  if (ctx.json) ctx.out.json(v);
  else renderDisks(ctx.out, v);
  return EXIT.ok;
}

export function renderDisks(out: Output, v: NodeDisksView): void {
  out.line(`${out.heading('node')} ${v.node}`);
  for (const s of v.summary) out.line(`  ${s}`);
  for (const d of v.disks) {
    out.line();
    out.line(`${out.heading(d.mount_point)}${d.shared ? " (shared: not this node's to spend)" : ''}  ${diskLine(d)}`);
    if (d.paths.length) out.line(`  holds ${d.paths.join(', ')}`);
    if (d.weights.length) out.line(weightsTable(out, d.weights));
  }
  if (v.elsewhere.length) {
    out.line();
    out.line(`${out.heading('on no reported filesystem')}`);
    out.line(weightsTable(out, v.elsewhere));
  }
}

function diskLine(d: DiskUseView): string {
  return `used ${bytesOrUnknown(d.used_bytes)} of ${bytesOrUnknown(d.total_bytes)}, free ${bytesOrUnknown(d.free_bytes)}: wanted weights ${bytesOrUnknown(d.wanted_bytes)}, orphans ${bytesOrUnknown(d.orphan_bytes)}, unused model dirs ${bytesOrUnknown(d.unused_model_dir_bytes)}, other files ${bytesOrUnknown(d.other_bytes)}`;
}

function weightsTable(out: Output, ws: readonly DiskWeightsView[]): string {
  return out.table(
    ['SIZE', 'KIND', 'MODELS', 'LAST USED', 'PATH'],
    ws.map((w) => [
      bytesOrUnknown(w.size_bytes),
      w.kind,
      w.models.length ? w.models.join(',') : w.kind === 'cache' ? out.c.yellow('none (orphan)') : 'none',
      w.last_used ?? UNKNOWN,
      w.path,
    ]),
  );
}

export async function audit(
  ctx: CtlContext,
  o: { since?: string; actor?: string; action?: string; target?: string; limit?: number },
): Promise<number> {
  const v = await ctx.client.audit(o);
  if (ctx.json) {
    ctx.out.json(v);
    return EXIT.ok;
  }
  if (!v.recorded) {
    ctx.out.line('this control plane has no store, so no change is recorded');
    return EXIT.ok;
  }
  if (v.entries.length === 0) {
    ctx.out.line('no change matches');
    return EXIT.ok;
  }
  ctx.out.line(auditTable(ctx.out, [...v.entries].reverse()));
  return EXIT.ok;
}

export function auditTable(out: Output, entries: readonly AuditEntryView[]): string {
  return out.table(
    ['TIME', 'WHO', 'ACTION', 'TARGET', 'WHAT'],
    entries.map((e) => [
      e.at.replace(/\.\d+Z$/, 'Z'),
      e.actor_label ? `${e.actor} (${e.actor_label})` : e.actor,
      e.action,
      e.target,
      e.summary,
    ]),
  );
}

/**
 * `plan FILE`: where the models in FILE would run if added now, and per
 * profile which nodes could take them and why each other node could not.
 * Nothing is added. Exit 3 when a model would be short of its wanted replicas.
 */
export async function plan(ctx: CtlContext, file: string): Promise<number> {
  const defs = readModelFile(file);
  const v = await ctx.client.planModels(defs);
  const short = v.models.filter((m) => m.placed.length < m.wanted);
  if (ctx.json) ctx.out.json(v);
  else {
    ctx.out.line(`nothing was added; the fleet as it is now:`);
    for (const m of v.models) renderPlan(ctx.out, m);
  }
  return short.length ? EXIT.noFit : EXIT.ok;
}

export function renderPlan(out: Output, m: ModelPlanView): void {
  out.line();
  const ok = m.placed.length >= m.wanted;
  const verdict =
    m.wanted === 0
      ? 'scaling.min is 0: nothing starts until a request arrives'
      : `${m.placed.length}/${m.wanted} replica(s) would be placed`;
  out.line(`${out.heading(m.name)}: ${ok ? out.c.green(verdict) : out.c.red(verdict)}`);
  for (const r of m.placed)
    out.line(
      `  profile ${r.profile}: ${r.shards.map((s) => `${s.node} (GPUs ${s.gpus.length ? s.gpus.join(',') : 'none, CPU'})`).join(' + ')}`,
    );
  if (m.explain) out.line(`  ${m.explain.replace(/\n/g, '\n  ')}`);
  for (const f of m.fit ?? []) {
    out.line(
      `  profile ${f.profile} (${f.engine}${f.shards > 1 ? `, ${f.shards} nodes per replica` : ''}): ${f.fits.length} node(s) fit${f.fits.length ? `: ${f.fits.join(', ')}` : ''}`,
    );
    // Nodes failing for the same reasons share a line: on a large fleet most fail alike.
    const byReasons = new Map<string, string[]>();
    for (const r of f.rejected) {
      const key = r.reasons.join('; ');
      byReasons.set(key, [...(byReasons.get(key) ?? []), r.node]);
    }
    for (const [reasons, nodes] of [...byReasons].sort((x, y) => y[1].length - x[1].length)) {
      const shown =
        nodes.length > 5 ? `${nodes.slice(0, 5).join(', ')} and ${nodes.length - 5} more` : nodes.join(', ');
      out.line(`    ${shown}: ${reasons}`);
    }
  }
}
