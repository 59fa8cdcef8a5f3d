// The request page's timeline: the steps the router recorded, in order, in
// the words `llmgw ctl request ID` prints (both come from the admin API's
// timelineOf), and below them each attempt's candidates with their scores,
// so "why this replica" reads as a table too. Its own file so the request
// page's verdict and attempts stay as they were.
import type { RequestDetailView, RequestEventView } from '../../../api/types.js';
import { Empty, Panel } from '../components.js';

const BAD_KINDS = new Set(['failed', 'limited', 'cold_gave_up', 'cold_ended', 'broken', 'refused']);

export function TimelinePanels({ r }: { r: RequestDetailView }) {
  const chosen = r.attempts.filter((a) => a.choice);
  return (
    <>
      <Panel title="Timeline" id="timeline">
        <p data-field="trace">
          Trace:{' '}
          {r.trace_id ? (
            <span class="mono">{r.trace_id}</span>
          ) : (
            'none (tracing is off, or this request was not sampled)'
          )}
        </p>
        <table>
          <thead>
            <tr>
              <th>ms</th>
              <th>Step</th>
            </tr>
          </thead>
          <tbody>
            {r.timeline.map((e: RequestEventView, i) => (
              <tr data-step={String(i + 1)} data-kind={e.kind}>
                <td>+{e.at_ms}</td>
                <td class={BAD_KINDS.has(e.kind) ? 'error' : undefined}>{e.says}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </Panel>
      <Panel title="Candidates" id="candidates">
        {chosen.length === 0 ? (
          <Empty>No attempt recorded its candidates.</Empty>
        ) : (
          <table>
            <thead>
              <tr>
                <th>Attempt</th>
                <th>Rule</th>
                <th>Replica</th>
                <th>Load</th>
                <th>From</th>
                <th>Expected hit</th>
              </tr>
            </thead>
            <tbody>
              {r.attempts.flatMap((a, i) =>
                (a.choice?.candidates ?? []).map((c) => (
                  <tr data-candidate={`${i + 1}:${c.replica}`} class={c.replica === a.replica ? 'ok' : undefined}>
                    <td>{i + 1}</td>
                    <td>
                      {a.choice!.by}
                      {a.choice!.ring_owner ? ` (ring owner ${a.choice!.ring_owner}, bound ${a.choice!.bound})` : ''}
                    </td>
                    <td>
                      {c.replica}
                      {c.replica === a.replica ? ' (won)' : ''}
                    </td>
                    <td>{c.load}</td>
                    <td>{c.sampled ? 'engine sample' : 'in flight here'}</td>
                    <td>{c.expected_hit === undefined ? '-' : `${Math.round(c.expected_hit * 100)}%`}</td>
                  </tr>
                )),
              )}
            </tbody>
          </table>
        )}
      </Panel>
    </>
  );
}
