// Replicas with their shards: state, idle time, engine queue and KV use,
// errors and fetch progress. idle -1 in the view means "no use reported",
// shown as "-", not as 0 s; so is a load the engine did not report.
import type { ReplicaView, ShardView } from '../../../api/types.js';
import { Bar, bytes, Empty, seconds, State, Unknown, Val } from '../components.js';

function Fetch({ s }: { s: ShardView }) {
  if (!s.fetch) return null;
  const f = s.fetch;
  const done = bytes(f.bytes_done);
  const speed = f.bytes_per_second ? ` at ${bytes(f.bytes_per_second)}/s` : '';
  if (f.total_bytes) {
    return (
      <Bar
        used={f.bytes_done}
        total={f.total_bytes}
        label={`${f.percent ?? Math.floor((100 * f.bytes_done) / f.total_bytes)}% of ${bytes(f.total_bytes)}${speed}`}
      />
    );
  }
  return (
    <span>
      {done} fetched of <Unknown text="unknown" />
      {speed}
    </span>
  );
}

function Shards({ shards }: { shards: ShardView[] }) {
  if (!shards.length) return <Unknown text="none" />;
  return (
    <table class="shards">
      <tbody>
        {shards.map((s) => (
          <tr data-shard={s.id}>
            <td>rank {s.rank}</td>
            <td>
              <a href={`/nodes/${encodeURIComponent(s.node)}`}>{s.node}</a>
            </td>
            <td>{s.gpus.length ? `GPU ${s.gpus.join(',')}` : 'CPU'}</td>
            <td>
              <State value={s.state} />
            </td>
            <td>
              <Fetch s={s} />
              {s.error && <span class="error">{s.error}</span>}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function ReplicaTable({ replicas }: { replicas: ReplicaView[] }) {
  return (
    <table id="replicas">
      <thead>
        <tr>
          <th>Replica</th>
          <th>Model</th>
          <th>Profile</th>
          <th>State</th>
          <th>Pool</th>
          <th>Endpoint</th>
          <th>Age</th>
          <th>Idle</th>
          <th title="requests waiting in the engine for a free sequence / generating, as the engine last reported">
            Queue (wait/run)
          </th>
          <th title="KV-cache use, as the engine last reported">KV</th>
          <th title="share of prompt tokens the engine found in its prefix cache lately, as it last reported">
            Cache hit
          </th>
          <th>Error</th>
          <th>Shards</th>
        </tr>
      </thead>
      <tbody>
        {replicas.map((r) => (
          <tr data-replica={r.id}>
            <td class="mono">{r.id}</td>
            <td>
              <a href={`/models/${encodeURIComponent(r.model)}`}>{r.model}</a>
            </td>
            <td>{r.profile}</td>
            <td data-field="state">
              <State value={r.state} />
            </td>
            <td>
              <Val v={r.pool} />
              {r.fabric && ` (fabric ${r.fabric})`}
            </td>
            <td class="mono">
              <Val v={r.endpoint} />
            </td>
            <td>{seconds(r.age_seconds)}</td>
            <td data-field="idle">{r.idle_seconds < 0 ? <Unknown /> : seconds(r.idle_seconds)}</td>
            <td data-field="queue">{r.load ? `${r.load.waiting}/${r.load.running}` : <Unknown />}</td>
            <td data-field="kv">
              {r.load?.kv_usage === undefined ? <Unknown /> : `${Math.round(r.load.kv_usage * 100)}%`}
            </td>
            <td data-field="cache-hit">
              {r.load?.cache_hit_rate === undefined ? <Unknown /> : `${Math.round(r.load.cache_hit_rate * 100)}%`}
            </td>
            <td>{r.error ? <span class="error">{r.error}</span> : ''}</td>
            <td>
              <Shards shards={r.shards} />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function ReplicasPage({ replicas }: { replicas: ReplicaView[] }) {
  if (!replicas.length)
    return <Empty>No replicas. Models with min replicas above 0 get some once a node fits them.</Empty>;
  return <ReplicaTable replicas={replicas} />;
}
