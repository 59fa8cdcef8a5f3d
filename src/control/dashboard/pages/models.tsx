// The models list and one model: replicas ready of total, fallbacks,
// profiles, and, when a model is not placed, the reasons placement gave.
import type { ModelView } from '../../../api/types.js';
import { Empty, Panel, Unknown, Val } from '../components.js';
import type { ModelData } from '../data.js';
import { EventsPanel } from './events.js';
import { ReplicaTable } from './replicas.js';
import { ModelWhyPanel } from './why.js';

export function ModelsPage({ models }: { models: ModelView[] }) {
  if (!models.length)
    return <Empty>The catalog is empty. Add a model with `llmgw ctl models add` or the catalog file.</Empty>;
  return (
    <table id="models">
      <thead>
        <tr>
          <th>Model</th>
          <th>Aliases</th>
          <th>Ready / total</th>
          <th>Min–max</th>
          <th>Fallbacks</th>
          <th>Profiles</th>
          <th>Origin</th>
          <th>Source</th>
        </tr>
      </thead>
      <tbody>
        {models.map((m) => (
          <tr data-model={m.name}>
            <td>
              <a href={`/models/${encodeURIComponent(m.name)}`}>{m.name}</a>
            </td>
            <td>
              <Val v={m.aliases?.join(', ')} />
            </td>
            <td data-field="replicas">
              {m.ready_replicas}/{m.total_replicas}
            </td>
            <td>
              {m.min_replicas}–{m.max_replicas}
            </td>
            <td>
              <Val v={m.fallbacks?.join(' → ')} />
            </td>
            <td>{m.profiles.join(', ')}</td>
            <td>
              <Val v={m.origin} unknown="unknown" />
            </td>
            <td class="mono">{m.source}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** A profile's size; absent means what the catalog says it means for that field, in words. */
const gib = (v: number | null, absent: string) => (v === null ? <Unknown text={absent} /> : `${v} GiB`);

export function ModelPage({ data }: { data: ModelData }) {
  const { model: m, definition: d, explain } = data;
  return (
    <>
      <Panel title="Model" id="model">
        <table class="details">
          <tbody>
            <tr>
              <th>Name</th>
              <td>{m.name}</td>
            </tr>
            <tr>
              <th>Aliases</th>
              <td>
                <Val v={m.aliases?.join(', ')} />
              </td>
            </tr>
            <tr>
              <th>Source</th>
              <td class="mono">{m.source}</td>
            </tr>
            <tr>
              <th>Replicas ready / total</th>
              <td data-field="replicas">
                {m.ready_replicas}/{m.total_replicas}
              </td>
            </tr>
            <tr>
              <th>Scaling</th>
              <td>
                min {m.min_replicas}, max {m.max_replicas}, target {d.scaling.targetInflight} in flight per replica,
                idle timeout {d.scaling.idleTimeoutMs === null ? 'none' : `${d.scaling.idleTimeoutMs / 1000} s`}
              </td>
            </tr>
            <tr>
              <th>Fallbacks</th>
              <td>
                <Val v={m.fallbacks?.join(' → ')} />
              </td>
            </tr>
            {m.split?.length ? (
              <tr>
                <th>Split</th>
                <td data-field="split">
                  {m.split.map((t) => `${t.model} ${t.weight}`).join(', ')}
                  {m.split_by && m.split_by !== 'request' ? ` (by ${m.split_by})` : ''}
                </td>
              </tr>
            ) : null}
            {m.shadow ? (
              <tr>
                <th>Shadow</th>
                <td data-field="shadow">
                  {m.shadow.model}, {Math.round(m.shadow.share * 10000) / 100}% of requests copied:{' '}
                  <a href="/shadows">compare</a>
                </td>
              </tr>
            ) : null}
            <tr>
              <th>Routing</th>
              <td>{d.routing}</td>
            </tr>
            <tr>
              <th>Endpoints</th>
              <td data-field="endpoints">{d.endpoints.join(', ')}</td>
            </tr>
            <tr>
              <th>Origin</th>
              <td>
                <Val v={m.origin} unknown="unknown" />
              </td>
            </tr>
          </tbody>
        </table>
      </Panel>
      <Panel title="Profiles, in order of preference" id="profiles">
        <table>
          <thead>
            <tr>
              <th>Profile</th>
              <th>Engine</th>
              <th>GPUs per shard</th>
              <th>Shards</th>
              <th>GPU classes</th>
              <th>GPU memory</th>
              <th>RAM</th>
              <th>Disk</th>
              <th>Pool</th>
            </tr>
          </thead>
          <tbody>
            {d.profiles.map((p) => (
              <tr>
                <td>{p.name}</td>
                <td>{p.engine}</td>
                <td>{p.gpus === 0 ? 'CPU' : p.gpus}</td>
                <td>{p.shards}</td>
                <td>{p.gpuClasses.length ? p.gpuClasses.join(', ') : 'any'}</td>
                <td>{gib(p.gpuMemoryGiB, 'no requirement')}</td>
                <td>{gib(p.memoryGiB, 'not checked')}</td>
                <td>{gib(p.diskGiB, 'unknown')}</td>
                <td>{p.pool ?? 'every node'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </Panel>
      <ModelWhyPanel explain={explain} />
      <Panel title="Placement" id="placement">
        {explain.placed ? <p>Placed.</p> : <p class="error">Not placed.</p>}
        {explain.rejections?.length ? (
          <table>
            <thead>
              <tr>
                <th>Profile</th>
                <th>Pool</th>
                <th>Node</th>
                <th>Why not</th>
              </tr>
            </thead>
            <tbody>
              {explain.rejections.map((r) => (
                <tr>
                  <td>{r.profile}</td>
                  <td>
                    <Val v={r.pool} />
                  </td>
                  <td>
                    <Val v={r.node} />
                  </td>
                  <td>{r.reason}</td>
                </tr>
              ))}
            </tbody>
          </table>
        ) : (
          !explain.placed && (
            <Empty>Placement has not rejected it: it may not have been tried yet, or its min replicas is 0.</Empty>
          )
        )}
      </Panel>
      <Panel title="Replicas" id="replicas-panel">
        {data.replicas.length ? <ReplicaTable replicas={data.replicas} /> : <Empty>None.</Empty>}
      </Panel>
      <EventsPanel events={data.events} />
    </>
  );
}
