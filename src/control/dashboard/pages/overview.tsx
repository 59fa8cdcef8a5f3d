// The overview: how big the fleet is, and what needs a person now. The
// attention sentences are the summary view's, word for word, so the page and
// `llmgw ctl summary` say the same thing.
import type { OverviewData } from '../data.js';
import { Empty, Panel, Unknown } from '../components.js';

function byWord(counts: Record<string, number>) {
  const entries = Object.entries(counts).sort(([a], [b]) => a.localeCompare(b));
  if (!entries.length) return <Unknown text="none" />;
  return <>{entries.map(([k, v]) => `${k} ${v}`).join(', ')}</>;
}

/** A card's caption under its count: "1 node", "2 nodes", "0 nodes". */
function counted(n: number, word: string): string {
  return n === 1 ? word : `${word}s`;
}

export function OverviewPage({ data }: { data: OverviewData }) {
  const { summary, nodes, replicas } = data;
  // GPUs only of nodes that reported some: a node with none reported adds nothing, not zero.
  const reporting = nodes.filter((n) => n.gpu_total > 0);
  const gpuTotal = reporting.reduce((s, n) => s + n.gpu_total, 0);
  const gpuFree = reporting.reduce((s, n) => s + n.gpu_free, 0);
  const failed = replicas.filter((r) => r.state === 'failed');
  const unhealthy = nodes.flatMap((n) => (n.unhealthy_gpus ?? []).map((u) => ({ node: n.id, text: u })));
  const lost = nodes.filter((n) => n.liveness !== 'up');
  return (
    <>
      <div class="cards">
        <div class="card" id="card-nodes">
          <div class="n">{summary.nodes.total}</div>
          <div>{counted(summary.nodes.total, 'node')}</div>
          <div>{byWord(summary.nodes.by_state)}</div>
          <div>{byWord(summary.nodes.by_liveness)}</div>
        </div>
        <div class="card" id="card-gpus">
          <div class="n">{reporting.length ? `${gpuFree}/${gpuTotal}` : <Unknown />}</div>
          <div>GPUs free</div>
        </div>
        <div class="card" id="card-models">
          <div class="n">{summary.models.total}</div>
          <div>{counted(summary.models.total, 'model')}</div>
          <div>
            {summary.models.from_file} from file, {summary.models.stored} stored
          </div>
          <div>{summary.models.not_placed.length} not placed</div>
        </div>
        <div class="card" id="card-replicas">
          <div class="n">{summary.replicas.total}</div>
          <div>{counted(summary.replicas.total, 'replica')}</div>
          <div>{byWord(summary.replicas.by_state)}</div>
        </div>
        <div class="card" id="card-store">
          <div class="n">{summary.store ? 'yes' : 'no'}</div>
          <div>store</div>
        </div>
      </div>
      <Panel title="Needs attention" id="attention">
        {summary.attention.length ? (
          <ul class="attention">
            {summary.attention.map((a) => (
              <li>{a}</li>
            ))}
          </ul>
        ) : (
          <Empty>Nothing needs attention.</Empty>
        )}
      </Panel>
      {lost.length > 0 && (
        <Panel title="Nodes not up" id="nodes-not-up">
          <ul>
            {lost.map((n) => (
              <li>
                <a href={`/nodes/${encodeURIComponent(n.id)}`}>{n.id}</a>: {n.liveness}, last heartbeat{' '}
                {n.last_seen_ago ? `${n.last_seen_ago} ago` : 'never'}
              </li>
            ))}
          </ul>
        </Panel>
      )}
      {unhealthy.length > 0 && (
        <Panel title="Unhealthy GPUs" id="unhealthy-gpus">
          <ul>
            {unhealthy.map((u) => (
              <li>
                <a href={`/nodes/${encodeURIComponent(u.node)}`}>{u.node}</a> {u.text}
              </li>
            ))}
          </ul>
        </Panel>
      )}
      {summary.models.not_placed.length > 0 && (
        <Panel title="Models not placed" id="not-placed">
          <ul>
            {summary.models.not_placed.map((m) => (
              <li>
                <a href={`/models/${encodeURIComponent(m)}`}>{m}</a>
              </li>
            ))}
          </ul>
        </Panel>
      )}
      {failed.length > 0 && (
        <Panel title="Failing replicas" id="failing-replicas">
          <ul>
            {failed.map((r) => (
              <li>
                {r.id} of <a href={`/models/${encodeURIComponent(r.model)}`}>{r.model}</a>:{' '}
                <span class="error">{r.error ?? 'no error reported'}</span>
              </li>
            ))}
          </ul>
        </Panel>
      )}
    </>
  );
}
