// Traffic per model: requests per second, errors, and time-to-first-token
// and latency percentiles over the last few minutes, from the router's own
// metrics; the charts are SVG drawn here. A rate needs two samples: until
// then, and for a percentile with no requests behind it, the page says "-".
import { Empty, LineChart, Panel, rate, seconds, Val } from '../components.js';
import type { EndpointUsage } from '../data.js';
import type { TrafficView } from '../traffic.js';

export function TrafficPage({ view, usage }: { view: TrafficView; usage: EndpointUsage[] | null }) {
  const window = view.windowMs === null ? null : Math.round(view.windowMs / 1000);
  return (
    <>
      <p>
        {window === null
          ? `Rates need two samples; one is taken every ${Math.round(view.intervalMs / 1000)} s.`
          : `Rates and percentiles over the last ${window} s, sampled every ${Math.round(view.intervalMs / 1000)} s.`}
      </p>
      <Panel title="Per model" id="traffic-table">
        {view.models.length ? (
          <table id="traffic">
            <thead>
              <tr>
                <th>Model</th>
                <th>Requests/s</th>
                <th>5xx/s</th>
                <th>4xx/s</th>
                <th>Requests since start</th>
                <th>5xx since start</th>
                <th>TTFT p50 / p95 / p99</th>
                <th>Latency p50 / p95 / p99</th>
              </tr>
            </thead>
            <tbody>
              {view.models.map((m) => (
                <tr data-model={m.model}>
                  <td>{m.model}</td>
                  <td data-field="rps">
                    <Val v={rate(m.requestsPerSecond)} />
                  </td>
                  <td>
                    <Val v={rate(m.errorsPerSecond)} />
                  </td>
                  <td>
                    <Val v={rate(m.refusedPerSecond)} />
                  </td>
                  <td data-field="total">{m.requestsTotal}</td>
                  <td>{m.errorsTotal}</td>
                  <td>
                    <Val v={seconds(m.ttftP50s)} /> / <Val v={seconds(m.ttftP95s)} /> / <Val v={seconds(m.ttftP99s)} />
                  </td>
                  <td>
                    <Val v={seconds(m.durationP50s)} /> / <Val v={seconds(m.durationP95s)} /> /{' '}
                    <Val v={seconds(m.durationP99s)} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        ) : (
          <Empty>No requests since the control plane started.</Empty>
        )}
      </Panel>
      <Panel title="Usage per model and endpoint, since the store was made" id="usage-table">
        {usage === null ? (
          <Empty>This control plane has no store, so it keeps no usage.</Empty>
        ) : usage.length ? (
          <table id="usage">
            <thead>
              <tr>
                <th>Model</th>
                <th>Endpoint</th>
                <th>Requests</th>
                <th>Errors</th>
                <th>Prompt tokens</th>
                <th>Completion tokens</th>
              </tr>
            </thead>
            <tbody>
              {usage.map((u) => (
                <tr data-usage={`${u.model}:${u.endpoint}`}>
                  <td>{u.model}</td>
                  <td data-field="endpoint">{u.endpoint}</td>
                  <td data-field="requests">{u.requests}</td>
                  <td>{u.errors}</td>
                  <td>{u.promptTokens}</td>
                  <td>{u.completionTokens}</td>
                </tr>
              ))}
            </tbody>
          </table>
        ) : (
          <Empty>No request has been counted yet; the router writes its counts every few seconds.</Empty>
        )}
      </Panel>
      <Panel title="Charts" id="traffic-charts">
        <LineChart title="Requests per second" series={view.rateSeries} format={(v) => rate(v) ?? ''} />
        <LineChart title="Time to first token, p95" series={view.ttftP95Series} format={(v) => seconds(v) ?? ''} />
      </Panel>
    </>
  );
}
