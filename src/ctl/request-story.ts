// `ctl request ID`'s timeline: the steps the control plane's request log
// recorded, one line each in the order they happened, with the time since
// arrival in front, and the trace id to look the request up in a tracing
// backend. The words come from the server (the same the dashboard shows);
// this only lays them out. Apart from why-operations.ts, which renders the
// verdict above it.
import type { RequestEventView } from '../api/index.js';
import type { Output } from './render.js';

/** Kinds that mark something going wrong, shown in red; the ones that went right, in green. */
const BAD_KINDS = new Set(['failed', 'limited', 'cold_gave_up', 'cold_ended', 'broken', 'refused']);
const GOOD_KINDS = new Set(['answered', 'cold_ready', 'first_token']);

/** The trace line and one line per step. `traceId` absent: says so, so nobody looks for one. */
export function renderTimeline(out: Output, timeline: readonly RequestEventView[], traceId: string | undefined): void {
  out.line(
    `${out.heading('trace')}     ${traceId ?? out.c.dim('none (tracing is off, or this request was not sampled)')}`,
  );
  out.line(`${out.heading('timeline')}  ${timeline.length} steps, ms after arrival`);
  const width = Math.max(1, ...timeline.map((e) => String(e.at_ms).length));
  for (const e of timeline) {
    const says = BAD_KINDS.has(e.kind) ? out.c.red(e.says) : GOOD_KINDS.has(e.kind) ? out.c.green(e.says) : e.says;
    out.line(`  ${out.c.dim(`+${String(e.at_ms).padStart(width)} ms`)}  ${says}`);
  }
}
