// Small pieces every dashboard page uses: how an unknown value reads, byte
// and time formats, usage bars, action forms and the server-drawn SVG chart.
// In one place so that "unknown is never 0" is decided once, not per page.
import type { ComponentChildren } from 'preact';
import type { SeriesPoint } from './traffic.js';

/** What a page needs to know about the request it answers: the session's CSRF token for its forms. */
export interface PageContext {
  csrfToken: string;
  /** The path and query of this page, for forms that come back here. */
  here: string;
  /** Who is signed in, shown in the header; absent = the admin token (no person). */
  person?: { name: string; role: string };
  /** Whether the session may do what a button does; absent = it may (the admin token). A button it may not is not drawn. */
  may?: (permission: 'nodes.write' | 'weights.collect' | 'people.write') => boolean;
}

/** A value that was not reported. Shown as a word, never as 0. */
export function Unknown({ text = '-' }: { text?: string }) {
  return (
    <span class="unknown" title="not reported">
      {text}
    </span>
  );
}

export function bytes(n: number | undefined | null): string | null {
  if (n === undefined || n === null || !Number.isFinite(n)) return null;
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let v = n;
  let i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${i === 0 ? v : v.toFixed(v >= 100 ? 0 : 1)} ${units[i]}`;
}

/** Seconds as "850 ms", "2.4 s", "3m12s"; null stays null. */
export function seconds(s: number | null | undefined): string | null {
  if (s === null || s === undefined || !Number.isFinite(s)) return null;
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 60) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${Math.round(s - m * 60)}s`;
  return `${Math.floor(m / 60)}h${m % 60}m`;
}

export function rate(r: number | null): string | null {
  if (r === null || !Number.isFinite(r)) return null;
  return r >= 10 ? r.toFixed(0) : r.toFixed(2);
}

/** A formatted value or the unknown marker. */
export function Val({ v, unknown = '-' }: { v: string | number | null | undefined; unknown?: string }) {
  return v === null || v === undefined || v === '' ? <Unknown text={unknown} /> : <>{v}</>;
}

/**
 * A usage bar: `used` of `total`. When the total is unknown (absent or 0,
 * which means "not reported"), no bar is drawn, only the word.
 */
export function Bar({ used, total, label }: { used: number | null; total: number | null | undefined; label: string }) {
  if (!total || used === null) return <Unknown text="unknown" />;
  const pct = Math.max(0, Math.min(100, (100 * used) / total));
  return (
    <span class="bar" title={label}>
      <span class="bar-track">
        <span class={pct >= 90 ? 'bar-fill hot' : 'bar-fill'} style={`width:${pct.toFixed(1)}%`} />
      </span>
      <span class="bar-label">{label}</span>
    </span>
  );
}

/** A state word with a colour class by meaning (ok, warn, bad); the word itself is always shown. */
export function State({ value }: { value: string }) {
  const bad = new Set(['failed', 'lost', 'draining', 'stopping']);
  const warn = new Set(['cordoned', 'stale', 'pending', 'fetching', 'starting']);
  const cls = bad.has(value) ? 'state bad' : warn.has(value) ? 'state warn' : 'state ok';
  return <span class={cls}>{value}</span>;
}

export function CsrfField({ ctx }: { ctx: PageContext }) {
  return <input type="hidden" name="csrf" value={ctx.csrfToken} />;
}

/** Cordon, uncordon and drain buttons for one node: POST forms that come back to this page. */
export function NodeActions({ ctx, nodeId, state }: { ctx: PageContext; nodeId: string; state: string }) {
  // A viewer sees the node, not buttons the guard would refuse.
  if (ctx.may && !ctx.may('nodes.write')) return null;
  const action = `/nodes/${encodeURIComponent(nodeId)}/state`;
  const button = (word: string, label: string, title: string) => (
    <form method="post" action={action} class="inline">
      <CsrfField ctx={ctx} />
      <input type="hidden" name="state" value={word} />
      <input type="hidden" name="back" value={ctx.here} />
      <button type="submit" title={title} data-action={`${word}:${nodeId}`}>
        {label}
      </button>
    </form>
  );
  return (
    <span class="actions">
      {state !== 'cordoned' && button('cordon', 'Cordon', 'stop placing new replicas here')}
      {state !== 'ready' && button('uncordon', 'Uncordon', 'allow placement here again')}
      {state !== 'draining' && button('drain', 'Drain', 'move replicas off, make-before-break')}
    </span>
  );
}

export function Panel({ title, id, children }: { title: string; id?: string; children: ComponentChildren }) {
  return (
    <section class="panel" id={id}>
      <h2>{title}</h2>
      {children}
    </section>
  );
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <p class="empty">{children}</p>;
}

const COLOURS = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#ca8a04', '#db2777'];

/**
 * A line chart drawn on the server as SVG: one polyline per series, gaps
 * where a point is null, the y axis from 0 to the largest value. No script,
 * so it works with scripts off and refreshes with its panel.
 */
export function LineChart({
  series,
  format,
  title,
}: {
  series: ReadonlyMap<string, readonly SeriesPoint[]>;
  format: (v: number) => string;
  title: string;
}) {
  const width = 640;
  const height = 160;
  const pad = { left: 56, right: 8, top: 8, bottom: 20 };
  const all = [...series.values()].flat();
  const values = all.map((p) => p.value).filter((v): v is number => v !== null);
  if (all.length < 2 || values.length === 0) return <Empty>{title}: not enough samples yet</Empty>;
  const t0 = Math.min(...all.map((p) => p.atMs));
  const t1 = Math.max(...all.map((p) => p.atMs));
  const vmax = Math.max(...values) || 1;
  const x = (t: number) => pad.left + ((width - pad.left - pad.right) * (t - t0)) / Math.max(1, t1 - t0);
  const y = (v: number) => height - pad.bottom - ((height - pad.top - pad.bottom) * v) / vmax;
  let i = 0;
  const paths = [...series.entries()].map(([name, points]) => {
    const runs: string[] = [];
    let run: string[] = [];
    for (const p of points) {
      if (p.value === null) {
        if (run.length) runs.push(run.join(' '));
        run = [];
        continue;
      }
      run.push(`${x(p.atMs).toFixed(1)},${y(p.value).toFixed(1)}`);
    }
    if (run.length) runs.push(run.join(' '));
    const colour = COLOURS[i++ % COLOURS.length]!;
    return { name, runs, colour };
  });
  return (
    <figure class="chart">
      <svg viewBox={`0 0 ${width} ${height}`} width={width} height={height} role="img" aria-label={title}>
        <line x1={pad.left} y1={height - pad.bottom} x2={width - pad.right} y2={height - pad.bottom} stroke="#999" />
        <line x1={pad.left} y1={pad.top} x2={pad.left} y2={height - pad.bottom} stroke="#999" />
        <text x={pad.left - 4} y={pad.top + 10} text-anchor="end" font-size="10">
          {format(vmax)}
        </text>
        <text x={pad.left - 4} y={height - pad.bottom} text-anchor="end" font-size="10">
          0
        </text>
        <text x={pad.left} y={height - 4} font-size="10">
          {`${Math.round((t1 - t0) / 1000)} s ago`}
        </text>
        <text x={width - pad.right} y={height - 4} text-anchor="end" font-size="10">
          now
        </text>
        {paths.map((p) =>
          p.runs.map((points) =>
            points.includes(' ') ? (
              <polyline points={points} fill="none" stroke={p.colour} stroke-width="1.5" />
            ) : (
              <circle cx={points.split(',')[0]} cy={points.split(',')[1]} r="2" fill={p.colour} />
            ),
          ),
        )}
      </svg>
      <figcaption>
        {title}:{' '}
        {paths.map((p) => (
          <span class="legend">
            <span class="swatch" style={`background:${p.colour}`} /> {p.name}
          </span>
        ))}
      </figcaption>
    </figure>
  );
}
