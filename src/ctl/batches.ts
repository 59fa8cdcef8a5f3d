// `llmgw ctl batches`: every batch with its progress, rate and estimated
// finish; `ctl batches ID` one of them with what the pace says of each of
// its models (why it is paused, or how many places are spare); `ctl batches
// cancel ID` to stop one. Reads the admin API (GET /api/v1/batches), never
// the store. Its own file because a batch reads as its own table.
import type { BatchAdminView } from '../api/index.js';
import { EXIT, type CtlContext } from './context.js';
import { formatSeconds, UNKNOWN, type Output } from './render.js';

export async function listBatches(ctx: CtlContext, nowMs = Date.now()): Promise<number> {
  const view = await ctx.client.batches();
  if (ctx.json) {
    ctx.out.json(view);
    return EXIT.ok;
  }
  if (view.batches.length === 0) {
    ctx.out.line('no batch yet: a client makes one with POST /v1/batches (docs/batches.md)');
    return EXIT.ok;
  }
  renderBatches(ctx.out, view.batches, nowMs);
  return EXIT.ok;
}

export async function showBatch(ctx: CtlContext, id: string, nowMs = Date.now()): Promise<number> {
  const b = await ctx.client.batch(id);
  if (ctx.json) {
    ctx.out.json(b);
    return EXIT.ok;
  }
  const out = ctx.out;
  out.line(
    `${out.heading(`batch ${b.id}`)}  ${out.state(b.status)}, ${b.endpoint}, owner ${b.owner} (key ${b.key_id})`,
  );
  out.line(`  lines     ${progressText(b)}${b.running ? `, ${b.running} running` : ''}`);
  out.line(`  created   ${when(b.created_at, nowMs)}`);
  out.line(`  started   ${b.started_at === null ? 'not yet' : when(b.started_at, nowMs)}`);
  if (b.ended_at !== null) out.line(`  ended     ${when(b.ended_at, nowMs)}`);
  else out.line(`  expires   ${when(b.expires_at, nowMs)} (its completion window)`);
  out.line(`  rate      ${b.lines_per_second === null ? UNKNOWN : `${b.lines_per_second} lines/s`}`);
  if (b.ended_at === null) out.line(`  finish    ${finishText(b, nowMs)}`);
  if (b.models.length) out.line(`  models    ${b.models.join(', ')}`);
  for (const p of b.pace ?? []) out.line(`  pace      ${p.model}: ${p.message} (${p.in_flight} in flight from here)`);
  return EXIT.ok;
}

export async function cancelBatch(ctx: CtlContext, id: string, options: { yes: boolean }): Promise<number> {
  const b = await ctx.client.batch(id);
  if (ctx.interactive && !options.yes) {
    const ok = await ctx.confirm(
      `cancel batch ${b.id} (${progressText(b)})? running lines finish, the rest are closed as cancelled [y/N] `,
    );
    if (!ok) {
      ctx.warn(`batch ${b.id} was not cancelled`);
      return EXIT.failed;
    }
  }
  const after = await ctx.client.cancelBatch(id);
  if (ctx.json) ctx.out.json(after);
  else ctx.out.line(`batch ${after.id} is ${after.status}`);
  return EXIT.ok;
}

export function renderBatches(out: Output, rows: readonly BatchAdminView[], nowMs: number): void {
  out.line(
    out.table(
      ['ID', 'OWNER', 'MODELS', 'STATUS', 'DONE/FAILED/TOTAL', 'STARTED', 'RATE', 'FINISH'],
      rows.map((b) => [
        b.id,
        b.owner,
        b.models.length ? b.models.join(',') : UNKNOWN,
        out.state(pausedOr(b)),
        `${b.completed}/${b.failed}/${b.total}`,
        b.started_at === null ? 'not yet' : when(b.started_at, nowMs),
        b.lines_per_second === null ? UNKNOWN : `${b.lines_per_second}/s`,
        b.ended_at === null ? finishText(b, nowMs) : `ended ${when(b.ended_at, nowMs)}`,
      ]),
    ),
  );
}

/** A running batch every one of whose models is paused reads as paused: the state an operator asks about. */
function pausedOr(b: BatchAdminView): string {
  const pace = b.pace ?? [];
  return b.status === 'in_progress' && pace.length > 0 && pace.every((p) => p.reason === 'paused')
    ? 'paused'
    : b.status;
}

function progressText(b: BatchAdminView): string {
  const done = b.completed + b.failed;
  const pct = b.total ? Math.floor((done / b.total) * 100) : 100;
  return `${done} of ${b.total} done (${pct}%), ${b.failed} failed`;
}

function finishText(b: BatchAdminView, nowMs: number): string {
  if (b.estimated_finish_at === null) return b.started_at === null ? 'not started' : 'unknown (nothing done yet)';
  return `~${when(b.estimated_finish_at, nowMs)}`;
}

/** An epoch ms as "3m12s ago" or "in 5m0s", and the UTC time. */
function when(ms: number, nowMs: number): string {
  const d = Math.round((ms - nowMs) / 1000);
  const rel = d >= 0 ? `in ${formatSeconds(d)}` : `${formatSeconds(-d)} ago`;
  return `${rel} (${new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z')})`;
}
