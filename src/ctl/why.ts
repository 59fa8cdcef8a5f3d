// How ctl prints the operator's "why" answers: the cause in words first,
// then the numbers behind it. Kept beside read.ts rather than in it because
// the same sentences appear under explain, node and weights, and each
// prints them the same way.
import type { ExplainView, NodeDetailView, OrphansView } from '../api/index.js';
import { formatSeconds, type Output, UNKNOWN } from './render.js';

/** The model's "why" (question 1): the summary, then the replicas that do not serve. Nothing from an older control plane that sends none. */
export function renderModelWhy(out: Output, why: ExplainView): void {
  if (!why.summary?.length) return;
  out.line(`${out.heading('why')}  ${why.ready_replicas ?? '?'} ready, min ${why.min_replicas ?? '?'}`);
  for (const s of why.summary) out.line(`  ${s}`);
  if (why.not_running?.length) {
    out.line(
      out.table(
        ['REPLICA', 'PROFILE', 'STATE', 'NODES', 'FOR', 'FAILURES', 'RETRY IN', 'WHY'],
        why.not_running.map((r) => [
          r.replica,
          r.profile,
          out.state(r.state),
          r.nodes.join(', ') || UNKNOWN,
          formatSeconds(r.since_seconds),
          r.failures === undefined ? '0' : String(r.failures),
          r.retry_in_seconds === undefined ? UNKNOWN : formatSeconds(r.retry_in_seconds),
          r.reason,
        ]),
      ),
    );
  }
}

/** The node's "why" (questions 2 and 4): what its drain waits for, why it is idle, model by model. */
export function renderNodeWhy(out: Output, d: NodeDetailView): void {
  if (!d.summary.length) return;
  out.line(`${out.heading('why')}`);
  for (const s of d.summary) out.line(`  ${s}`);
  if (d.drain_waits?.length) {
    out.line(
      out.table(
        ['REPLICA', 'MODEL', 'STATE', 'FOR', 'IN FLIGHT', 'REPLACEMENT', 'DEADLINE IN', 'WAITS FOR'],
        d.drain_waits.map((w) => [
          w.replica,
          w.model,
          out.state(w.state),
          formatSeconds(w.since_seconds),
          w.in_flight === undefined ? UNKNOWN : String(w.in_flight),
          w.replacement ? `${w.replacement} (${w.replacement_state ?? '?'})` : UNKNOWN,
          w.deadline_in_seconds === undefined ? UNKNOWN : formatSeconds(w.deadline_in_seconds),
          w.waits_for,
        ]),
      ),
    );
  }
  if (d.idle?.models.length) {
    out.line(
      out.table(
        ['MODEL', 'FITS HERE', 'REPLICAS', 'ON', 'MIN', 'WHY'],
        d.idle.models.map((m) => [
          m.model,
          m.fits ? out.c.green('yes') : out.c.red('no'),
          String(m.replicas),
          m.nodes.join(', ') || UNKNOWN,
          String(m.min_replicas),
          m.reason,
        ]),
      ),
    );
  }
}

/** What each node did at its last collect (question 3): removed, refused and why, or could not be asked. */
export function renderLastCollect(out: Output, o: OrphansView): void {
  if (o.last_collect === undefined) return;
  if (o.last_collect.length === 0) {
    out.line('last collect: none has asked any node yet');
    return;
  }
  out.line(out.heading('last collect, per node'));
  const rows: string[][] = [];
  for (const n of o.last_collect) {
    const when = n.at.replace('T', ' ').replace(/\.\d+Z$/, 'Z');
    if (n.unreachable) rows.push([n.node, when, n.actor, out.c.red('not asked'), '', n.unreachable]);
    for (const p of n.removed) rows.push([n.node, when, n.actor, 'removed', p, '']);
    for (const r of n.refused)
      rows.push([n.node, when, n.actor, out.c.yellow(`refused (${r.check})`), r.path, r.reason]);
    if (!n.unreachable && n.removed.length === 0 && n.refused.length === 0)
      rows.push([n.node, when, n.actor, 'nothing', '', 'the node was asked and answered with nothing']);
  }
  out.line(out.table(['NODE', 'AT', 'BY', 'WHAT', 'PATH', 'WHY'], rows));
}
