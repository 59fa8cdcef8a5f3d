// `llmgw ctl shadows`: each shadowed model against its candidate, side by
// side (requests, errors, time to first byte and total time at p50/p95,
// tokens), from the control plane's comparison; and the words a model's
// split and shadow read in under `ctl models` and `ctl model`. Its own file
// because the comparison is its own table, read the same way in both places.
import type { LatencyView, ModelView, ShadowSideView, ShadowView } from '../api/index.js';
import { EXIT, type CtlContext } from './context.js';
import { UNKNOWN, type Output } from './render.js';

export async function shadows(ctx: CtlContext): Promise<number> {
  const view = await ctx.client.shadows();
  if (ctx.json) {
    ctx.out.json(view);
    return EXIT.ok;
  }
  if (view.shadows.length === 0) {
    ctx.out.line('no model has a shadow: give one `shadow: {model: CANDIDATE, share: 0.05}` in the catalog');
    return EXIT.ok;
  }
  renderShadows(ctx.out, view.shadows);
  ctx.out.line();
  ctx.out.line(
    `control plane ${view.instance}: the requests its client listener took; latency over the newest ${view.samples_kept} of each side, from the send upstream`,
  );
  return EXIT.ok;
}

export function renderShadows(out: Output, rows: readonly ShadowView[]): void {
  out.line(
    out.table(
      [
        'MODEL',
        'CANDIDATE',
        'SHARE',
        'SIDE',
        'REQUESTS',
        'ERRORS',
        'TTFT P50/P95',
        'TOTAL P50/P95',
        'TOKENS IN/OUT',
        'NOT SENT',
      ],
      rows.flatMap((s) => [
        [
          s.model,
          s.candidate,
          s.share === undefined ? 'removed' : `${round(s.share * 100)}%`,
          'primary',
          ...sideCells(s.primary),
          dropped(s),
        ],
        ['', '', '', 'shadow', ...sideCells(s.shadow), s.in_flight ? `${s.in_flight} running` : ''],
      ]),
    ),
  );
}

function sideCells(side: ShadowSideView): string[] {
  return [
    String(side.requests),
    String(side.errors),
    latency(side.ttft),
    latency(side.total),
    `${side.prompt_tokens}/${side.completion_tokens}`,
  ];
}

function latency(l: LatencyView | undefined): string {
  return l ? `${l.p50_ms}/${l.p95_ms} ms` : UNKNOWN;
}

function dropped(s: ShadowView): string {
  const parts = Object.entries(s.dropped)
    .filter(([, n]) => n > 0)
    .map(([why, n]) => `${n} ${why.replace('_', ' ')}`);
  return parts.join(', ');
}

function round(n: number): number {
  return Math.round(n * 100) / 100;
}

/** A model's split in words: "chat 90, chat-v2 10 (by key)"; UNKNOWN-free: '' when it has none. */
export function splitText(m: ModelView): string {
  if (!m.split?.length) return '';
  const by = m.split_by && m.split_by !== 'request' ? ` (by ${m.split_by})` : '';
  return m.split.map((t) => `${t.model} ${t.weight}`).join(', ') + by;
}

/** A model's shadow in words: "candidate 5%"; '' when it has none. */
export function shadowText(m: ModelView): string {
  return m.shadow ? `${m.shadow.model} ${round(m.shadow.share * 100)}%` : '';
}
