// The nodes list and one node: capacity as bars, health, state and the
// cordon/uncordon/drain buttons. Absent numbers (a node that has not reported
// RAM or disk) read "unknown", never 0.
import type { NodeView } from '../../../api/types.js';
import { Bar, Empty, NodeActions, type PageContext, Panel, State, Unknown, Val } from '../components.js';
import type { NodeData } from '../data.js';
import { EventsPanel } from './events.js';
import { ReplicaTable } from './replicas.js';
import { NodeWhyPanel } from './why.js';

export function GpuBar({ n }: { n: NodeView }) {
  if (n.gpu_probe_error) return <Unknown text="unknown (probe failed)" />;
  if (n.gpu_total === 0) return <Unknown text="none reported" />;
  return <Bar used={n.gpu_total - n.gpu_free} total={n.gpu_total} label={`${n.gpu_free}/${n.gpu_total} free`} />;
}

export function DiskBar({ n }: { n: NodeView }) {
  if (n.disk_total_gb === undefined || n.disk_free_gb === undefined) return <Unknown text="unknown" />;
  return (
    <Bar
      used={n.disk_total_gb - n.disk_free_gb}
      total={n.disk_total_gb}
      label={`${n.disk_free_gb}/${n.disk_total_gb} GiB free`}
    />
  );
}

/** RAM available (the kernel's MemAvailable) of the total; the total alone when available is not reported. */
export function RamBar({ n }: { n: NodeView }) {
  if (n.memory_gb === undefined) return <Unknown text="unknown" />;
  if (n.memory_free_gb === undefined)
    return (
      <>
        {`${n.memory_gb} GiB`} <Unknown text="(free unknown)" />
      </>
    );
  return (
    <Bar
      used={n.memory_gb - n.memory_free_gb}
      total={n.memory_gb}
      label={`${n.memory_free_gb}/${n.memory_gb} GiB free`}
    />
  );
}

/** What holds a node back beside its admin state: a pending approval, GPUs changed since it was approved. Empty when nothing. */
export function Membership({ n }: { n: NodeView }) {
  return (
    <>
      {n.approval === 'pending' && (
        <strong class="error" data-field="approval" title={`llmgw ctl nodes approve ${n.id}`}>
          {' '}
          pending approval
        </strong>
      )}
      {n.hardware_change && (
        <span class="error" data-field="hardware-change">
          {' '}
          {n.hardware_change}
        </span>
      )}
    </>
  );
}

export function NodesPage({ nodes, ctx }: { nodes: NodeView[]; ctx: PageContext }) {
  if (!nodes.length)
    return <Empty>No node has joined yet. Start `llmgw agent` with the join token on a machine.</Empty>;
  return (
    <table id="nodes">
      <thead>
        <tr>
          <th>Node</th>
          <th>Hostname</th>
          <th>State</th>
          <th>Liveness</th>
          <th>GPUs</th>
          <th>GPU classes</th>
          <th>RAM</th>
          <th>Disk</th>
          <th>Unhealthy GPUs</th>
          <th>Replicas</th>
          <th>Agent</th>
          <th>Last seen</th>
          <th>Actions</th>
        </tr>
      </thead>
      <tbody>
        {nodes.map((n) => (
          <tr data-node={n.id}>
            <td>
              <a href={`/nodes/${encodeURIComponent(n.id)}`}>{n.id}</a>
            </td>
            <td>
              <Val v={n.hostname} unknown="unknown" />
            </td>
            <td data-field="state">
              <State value={n.state} />
              <Membership n={n} />
            </td>
            <td data-field="liveness">
              <State value={n.liveness} />
            </td>
            <td data-field="gpus">
              <GpuBar n={n} />
            </td>
            <td>
              <Val v={n.gpu_classes?.join(', ')} />
            </td>
            <td data-field="ram">
              <RamBar n={n} />
            </td>
            <td data-field="disk">
              <DiskBar n={n} />
            </td>
            <td>
              {n.unhealthy_gpus?.length ? (
                <span class="error">{n.unhealthy_gpus.join('; ')}</span>
              ) : n.gpu_probe_error ? (
                <span class="error">{n.gpu_probe_error}</span>
              ) : (
                'none'
              )}
            </td>
            <td data-field="replicas">{n.replicas}</td>
            <td data-field="agent">
              <Val v={n.agent_version} unknown="unknown" />
            </td>
            <td>{n.last_seen_ago ? `${n.last_seen_ago} ago` : 'never'}</td>
            <td>
              <NodeActions ctx={ctx} nodeId={n.id} state={n.state} />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function NodePage({ data, ctx }: { data: NodeData; ctx: PageContext }) {
  const n = data.node;
  const labels = Object.entries(n.labels ?? {}).sort(([a], [b]) => a.localeCompare(b));
  return (
    <>
      <Panel title="Node" id="node">
        <table class="details">
          <tbody>
            <tr>
              <th>Id</th>
              <td>{n.id}</td>
            </tr>
            <tr>
              <th>Hostname</th>
              <td>
                <Val v={n.hostname} unknown="unknown" />
              </td>
            </tr>
            <tr>
              <th>Management address</th>
              <td>
                <Val v={n.mgmt_addr} unknown="unknown" />
              </td>
            </tr>
            <tr>
              <th>State</th>
              <td data-field="state">
                <State value={n.state} />
                <Membership n={n} /> <NodeActions ctx={ctx} nodeId={n.id} state={n.state} />
              </td>
            </tr>
            <tr>
              <th>Liveness</th>
              <td>
                <State value={n.liveness} /> (last heartbeat {n.last_seen_ago ? `${n.last_seen_ago} ago` : 'never'})
              </td>
            </tr>
            <tr>
              <th>GPUs</th>
              <td>
                <GpuBar n={n} />
              </td>
            </tr>
            <tr>
              <th>GPU classes</th>
              <td>
                <Val v={n.gpu_classes?.join(', ')} />
              </td>
            </tr>
            <tr>
              <th>RAM</th>
              <td data-field="ram">
                <RamBar n={n} />
              </td>
            </tr>
            <tr>
              <th>Disk (local, for weights)</th>
              <td>
                <DiskBar n={n} />{' '}
                <a href={`/nodes/${encodeURIComponent(n.id)}/disks`} id="disk-link">
                  where it went
                </a>
              </td>
            </tr>
            <tr>
              <th>Fabrics</th>
              <td>
                <Val v={n.fabrics?.join(', ')} />
              </td>
            </tr>
            <tr>
              <th>Agent version</th>
              <td>
                <Val v={n.agent_version} unknown="unknown" />
              </td>
            </tr>
            <tr>
              <th>Replicas</th>
              <td>{n.replicas}</td>
            </tr>
          </tbody>
        </table>
      </Panel>
      <NodeWhyPanel why={data.why} />
      {(n.unhealthy_gpus?.length || n.gpu_probe_error || n.drain_blocked?.length) && (
        <Panel title="Problems" id="problems">
          <ul>
            {n.gpu_probe_error && <li class="error">{n.gpu_probe_error}</li>}
            {(n.unhealthy_gpus ?? []).map((u) => (
              <li class="error">{u}</li>
            ))}
            {(n.drain_blocked ?? []).map((d) => (
              <li>{d}</li>
            ))}
          </ul>
        </Panel>
      )}
      <Panel title="Labels" id="labels">
        {labels.length ? (
          <table>
            <tbody>
              {labels.map(([k, v]) => (
                <tr>
                  <th>{k}</th>
                  <td class="mono">{v}</td>
                </tr>
              ))}
            </tbody>
          </table>
        ) : (
          <Empty>No labels.</Empty>
        )}
      </Panel>
      <Panel title="Replicas on this node" id="replicas">
        {data.replicas.length ? <ReplicaTable replicas={data.replicas} /> : <Empty>None.</Empty>}
      </Panel>
      <Panel title="Weights on disk" id="weights">
        {n.models_on_disk?.length ? (
          <ul class="mono">
            {n.models_on_disk.map((p) => (
              <li>{p}</li>
            ))}
          </ul>
        ) : (
          <Empty>None reported.</Empty>
        )}
      </Panel>
      <EventsPanel events={data.events} />
    </>
  );
}
