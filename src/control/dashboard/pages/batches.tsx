// The batches page: every batch with its progress, rate and estimated
// finish, and for a running one what the pace says of each of its models,
// the same figures `llmgw ctl batches` prints (GET /api/v1/batches).
import type { BatchAdminView, BatchesAdminView } from '../../../api/index.js';
import { Bar, Empty, Panel, seconds, State, Unknown } from '../components.js';

/** An epoch ms as "in 5m 0s" or "3m 12s ago" from `nowMs`. */
function relative(ms: number, nowMs: number): string {
  const d = Math.round((ms - nowMs) / 1000);
  return d >= 0 ? `in ${seconds(d)}` : `${seconds(-d)} ago`;
}

function When({ ms, nowMs }: { ms: number | null; nowMs: number }) {
  if (ms === null) return <Unknown text="not yet" />;
  return <time datetime={new Date(ms).toISOString()}>{relative(ms, nowMs)}</time>;
}

/** A running batch whose every model is paused for interactive traffic shows as paused. */
function status(b: BatchAdminView): string {
  const pace = b.pace ?? [];
  return b.status === 'in_progress' && pace.length > 0 && pace.every((p) => p.reason === 'paused')
    ? 'paused'
    : b.status;
}

export function BatchesPage({ view, nowMs }: { view: BatchesAdminView; nowMs: number }) {
  return (
    <Panel title="Batches: lines run on idle capacity, paused while interactive requests wait" id="batches">
      {view.batches.length === 0 ? (
        <Empty>No batch yet. A client makes one with POST /v1/batches (docs/batches.md).</Empty>
      ) : (
        <table>
          <thead>
            <tr>
              <th>Batch</th>
              <th>Owner</th>
              <th>Models</th>
              <th>Status</th>
              <th>Progress</th>
              <th>Done / failed / total</th>
              <th>Started</th>
              <th>Rate</th>
              <th>Estimated finish</th>
              <th>Pace</th>
            </tr>
          </thead>
          <tbody>
            {view.batches.map((b) => (
              <tr data-batch={b.id}>
                <td>{b.id}</td>
                <td>{b.owner}</td>
                <td>{b.models.length ? b.models.join(', ') : <Unknown />}</td>
                <td data-field="status">
                  <State value={status(b)} />
                </td>
                <td>
                  <Bar used={b.completed + b.failed} total={b.total} label="lines done" />
                </td>
                <td data-field="counts">
                  {b.completed} / {b.failed} / {b.total}
                  {b.running ? ` (${b.running} running)` : ''}
                </td>
                <td>
                  <When ms={b.started_at} nowMs={nowMs} />
                </td>
                <td data-field="rate">{b.lines_per_second === null ? <Unknown /> : `${b.lines_per_second} lines/s`}</td>
                <td data-field="finish">
                  {b.ended_at !== null ? (
                    <>
                      ended <When ms={b.ended_at} nowMs={nowMs} />
                    </>
                  ) : b.estimated_finish_at === null ? (
                    <Unknown text="unknown until a line is done" />
                  ) : (
                    <When ms={b.estimated_finish_at} nowMs={nowMs} />
                  )}
                </td>
                <td data-field="pace">
                  {(b.pace ?? []).map((p) => (
                    <div data-model={p.model} data-reason={p.reason}>
                      {p.model}: {p.message}
                    </div>
                  ))}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <p class="empty">The estimate is the rate so far, pauses included: a batch runs as fast as the fleet is idle.</p>
    </Panel>
  );
}
