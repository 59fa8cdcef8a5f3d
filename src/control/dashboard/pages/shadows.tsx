// The shadows page: each shadowed model against its candidate, side by
// side, the same figures `llmgw ctl shadows` prints (GET /api/v1/shadows).
import type { LatencyView, ShadowSideView, ShadowsView } from '../../../api/index.js';
import { Empty, Panel, Unknown } from '../components.js';

const latency = (l: LatencyView | undefined) =>
  l ? (
    <>
      {l.p50_ms} / {l.p95_ms} ms
    </>
  ) : (
    <Unknown text="no sample yet" />
  );

function SideCells({ side }: { side: ShadowSideView }) {
  return (
    <>
      <td data-field="requests">{side.requests}</td>
      <td data-field="errors">{side.errors}</td>
      <td>{latency(side.ttft)}</td>
      <td>{latency(side.total)}</td>
      <td>
        {side.prompt_tokens} / {side.completion_tokens}
      </td>
    </>
  );
}

export function ShadowsPage({ view }: { view: ShadowsView }) {
  return (
    <Panel title="Shadows: each model against its candidate" id="shadows">
      {view.shadows.length === 0 ? (
        <Empty>No model has a shadow. Give one `shadow: {'{model: CANDIDATE, share: 0.05}'}` in the catalog.</Empty>
      ) : (
        <table>
          <thead>
            <tr>
              <th>Model</th>
              <th>Candidate</th>
              <th>Share</th>
              <th>Side</th>
              <th>Requests</th>
              <th>Errors</th>
              <th>TTFT p50 / p95</th>
              <th>Total p50 / p95</th>
              <th>Tokens in / out</th>
              <th>Copies not sent</th>
            </tr>
          </thead>
          <tbody>
            {view.shadows.flatMap((s) => [
              <tr data-shadow={s.model} data-side="primary">
                <td rowSpan={2}>
                  <a href={`/models/${encodeURIComponent(s.model)}`}>{s.model}</a>
                </td>
                <td rowSpan={2}>
                  <a href={`/models/${encodeURIComponent(s.candidate)}`}>{s.candidate}</a>
                </td>
                <td rowSpan={2}>{s.share === undefined ? 'removed' : `${Math.round(s.share * 10000) / 100}%`}</td>
                <td>primary</td>
                <SideCells side={s.primary} />
                <td rowSpan={2}>
                  {s.dropped.busy} busy, {s.dropped.no_replica} no replica, {s.dropped.not_served} not served
                  {s.in_flight ? `; ${s.in_flight} running` : ''}
                </td>
              </tr>,
              <tr data-shadow={s.model} data-side="shadow">
                <td>shadow</td>
                <SideCells side={s.shadow} />
              </tr>,
            ])}
          </tbody>
        </table>
      )}
      <p class="empty">
        Control plane {view.instance}: the requests its client listener took. Latency over the newest{' '}
        {view.samples_kept} of each side, from the send upstream; counts and tokens since it started. Copies are charged
        to no key.
      </p>
    </Panel>
  );
}
