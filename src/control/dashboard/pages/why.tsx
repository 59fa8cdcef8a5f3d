// The operator's "why" panels: why a model does not run, why a node is
// idle, what its drain waits for, what each node did at its last collect.
// Each renders the admin API's own answer (the same one ctl prints), cause
// first and the numbers behind it after, so a page and ctl cannot disagree.
import type { DrainWaitView, ExplainView, NodeDetailView, NodeLastCollectView } from '../../../api/types.js';
import { Empty, Panel, seconds, State, Unknown } from '../components.js';

/** The sentences, the first one stronger: it is the answer, the rest are its reasons. */
function Sentences({ lines, id }: { lines: readonly string[]; id: string }) {
  return (
    <ul id={id} class="why">
      {lines.map((l, i) => (
        <li>{i === 0 ? <strong>{l}</strong> : l}</li>
      ))}
    </ul>
  );
}

export function ModelWhyPanel({ explain }: { explain: ExplainView }) {
  if (!explain.summary?.length) return null;
  return (
    <Panel title="Why" id="why">
      <p>
        <span data-field="ready">{explain.ready_replicas ?? '?'}</span> ready, min{' '}
        <span data-field="min">{explain.min_replicas ?? '?'}</span>
        {explain.profiles?.map((p) => (
          <span data-profile={p.profile}>
            {'; '}profile {p.profile}: {p.nodes_fit}/{p.node_count} nodes fit
          </span>
        ))}
      </p>
      <Sentences lines={explain.summary} id="why-summary" />
      {explain.not_running?.length ? (
        <table id="not-running">
          <thead>
            <tr>
              <th>Replica</th>
              <th>Profile</th>
              <th>State</th>
              <th>Nodes</th>
              <th>For</th>
              <th>Failures</th>
              <th>Retry in</th>
              <th>Why</th>
            </tr>
          </thead>
          <tbody>
            {explain.not_running.map((r) => (
              <tr data-replica={r.replica}>
                <td class="mono">{r.replica}</td>
                <td>{r.profile}</td>
                <td>
                  <State value={r.state} />
                </td>
                <td>{r.nodes.join(', ') || <Unknown />}</td>
                <td>{seconds(r.since_seconds)}</td>
                <td>{r.failures ?? 0}</td>
                <td>{r.retry_in_seconds === undefined ? <Unknown /> : seconds(r.retry_in_seconds)}</td>
                <td data-field="reason">{r.reason}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </Panel>
  );
}

function DrainTable({ waits }: { waits: readonly DrainWaitView[] }) {
  return (
    <table id="drain-waits">
      <thead>
        <tr>
          <th>Replica</th>
          <th>Model</th>
          <th>State</th>
          <th>For</th>
          <th>In flight</th>
          <th>Replacement</th>
          <th>Deadline in</th>
          <th>Waits for</th>
        </tr>
      </thead>
      <tbody>
        {waits.map((w) => (
          <tr data-replica={w.replica}>
            <td class="mono">{w.replica}</td>
            <td>{w.model}</td>
            <td>
              <State value={w.state} />
            </td>
            <td>{seconds(w.since_seconds)}</td>
            <td>{w.in_flight ?? <Unknown />}</td>
            <td>{w.replacement ? `${w.replacement} (${w.replacement_state ?? '?'})` : <Unknown />}</td>
            <td>{w.deadline_in_seconds === undefined ? <Unknown /> : seconds(w.deadline_in_seconds)}</td>
            <td data-field="waits-for">{w.waits_for}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function NodeWhyPanel({ why }: { why: NodeDetailView }) {
  if (!why.summary.length) return null;
  return (
    <Panel title="Why" id="why">
      <Sentences lines={why.summary} id="why-summary" />
      {why.drain_waits?.length ? <DrainTable waits={why.drain_waits} /> : null}
      {why.idle?.models.length ? (
        <table id="idle-models">
          <thead>
            <tr>
              <th>Model</th>
              <th>Fits here</th>
              <th>Replicas</th>
              <th>On</th>
              <th>Min</th>
              <th>Why not here</th>
            </tr>
          </thead>
          <tbody>
            {why.idle.models.map((m) => (
              <tr data-model={m.model}>
                <td>
                  <a href={`/models/${encodeURIComponent(m.model)}`}>{m.model}</a>
                </td>
                <td data-field="fits">{m.fits ? 'yes' : <span class="error">no</span>}</td>
                <td>{m.replicas}</td>
                <td>{m.nodes.join(', ') || <Unknown />}</td>
                <td>{m.min_replicas}</td>
                <td data-field="reason">{m.reason}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </Panel>
  );
}

/** Absent `last`: no store, so no audit log to read it from. */
export function LastCollectPanel({ last }: { last: readonly NodeLastCollectView[] | undefined }) {
  if (last === undefined) return null;
  return (
    <Panel title="Last collect, per node" id="last-collect">
      {last.length === 0 ? (
        <Empty>No collect has asked any node yet.</Empty>
      ) : (
        <table>
          <thead>
            <tr>
              <th>Node</th>
              <th>At</th>
              <th>By</th>
              <th>What</th>
              <th>Path</th>
              <th>Why</th>
            </tr>
          </thead>
          <tbody>
            {last.flatMap((n) => [
              ...(n.unreachable
                ? [
                    <tr data-node={n.node} data-what="unreachable">
                      <td>{n.node}</td>
                      <td>{n.at}</td>
                      <td>{n.actor}</td>
                      <td class="error">not asked</td>
                      <td />
                      <td>{n.unreachable}</td>
                    </tr>,
                  ]
                : []),
              ...n.removed.map((p) => (
                <tr data-node={n.node} data-what="removed">
                  <td>{n.node}</td>
                  <td>{n.at}</td>
                  <td>{n.actor}</td>
                  <td>removed</td>
                  <td class="mono">{p}</td>
                  <td />
                </tr>
              )),
              ...n.refused.map((r) => (
                <tr data-node={n.node} data-what="refused">
                  <td>{n.node}</td>
                  <td>{n.at}</td>
                  <td>{n.actor}</td>
                  <td class="error">refused ({r.check})</td>
                  <td class="mono">{r.path}</td>
                  <td>{r.reason}</td>
                </tr>
              )),
            ])}
          </tbody>
        </table>
      )}
    </Panel>
  );
}
