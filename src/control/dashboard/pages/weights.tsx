// Orphaned weights and collecting them. Collect is the dangerous verb, so it
// sits behind a confirmation page that lists, per node, exactly the paths
// that will be asked for; the result page says what each node removed or
// refused, and why, as the admin API's summary has it.
import type { CollectSummary, OrphansView } from '../../../api/types.js';
import { bytes, CsrfField, Empty, type PageContext, Panel, Unknown } from '../components.js';
import { LastCollectPanel } from './why.js';

function OrphanTable({ view }: { view: OrphansView }) {
  return (
    <>
      {view.nodes.map((n) => (
        <Panel title={`${n.node}: ${bytes(n.reclaimable_bytes)} reclaimable`} id={`orphans-${n.node}`}>
          <table data-node={n.node}>
            <thead>
              <tr>
                <th>Path</th>
                <th>Source</th>
                <th>Size</th>
                <th>Last used</th>
              </tr>
            </thead>
            <tbody>
              {n.entries.map((e) => (
                <tr>
                  <td class="mono">{e.path}</td>
                  <td class="mono">{e.source ?? <Unknown text="unknown" />}</td>
                  <td>{e.size_bytes === undefined ? <Unknown text="unknown" /> : bytes(e.size_bytes)}</td>
                  <td>
                    {e.last_used_ms === undefined ? <Unknown text="unknown" /> : new Date(e.last_used_ms).toISOString()}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </Panel>
      ))}
    </>
  );
}

export function WeightsPage({ view }: { view: OrphansView }) {
  if (!view.nodes.length) {
    return (
      <>
        <Empty>No node reports weights that no model in the catalog wants.</Empty>
        <LastCollectPanel last={view.last_collect} />
      </>
    );
  }
  return (
    <>
      <p id="orphans-total">
        {bytes(view.total_bytes)} reclaimable on {view.nodes.length} node{view.nodes.length === 1 ? '' : 's'} (entries
        without a reported size add nothing). <a href="/weights/collect">Collect on every node…</a>
      </p>
      {view.nodes.map((n) => (
        <p>
          <a href={`/weights/collect?node=${encodeURIComponent(n.node)}`}>Collect on {n.node}…</a>
        </p>
      ))}
      <OrphanTable view={view} />
      <LastCollectPanel last={view.last_collect} />
    </>
  );
}

export function CollectConfirmPage({
  view,
  node,
  ctx,
}: {
  view: OrphansView;
  node: string | undefined;
  ctx: PageContext;
}) {
  if (!view.nodes.length) return <Empty>Nothing to collect{node ? ` on ${node}` : ''}: no orphans are reported.</Empty>;
  const count = view.nodes.reduce((s, n) => s + n.entries.length, 0);
  return (
    <>
      <p class="problem">
        Each node below will be asked to remove these {count} entries ({bytes(view.total_bytes)}). The list is computed
        again when you confirm, so a model added meanwhile keeps its weights, and each node checks every path again and
        may refuse.
      </p>
      <OrphanTable view={view} />
      <form method="post" action="/weights/collect">
        <CsrfField ctx={ctx} />
        {node !== undefined && <input type="hidden" name="node" value={node} />}
        <button type="submit" id="confirm-collect">
          Remove these weights{node ? ` on ${node}` : ' on every node listed'}
        </button>{' '}
        <a href="/weights">Cancel</a>
      </form>
    </>
  );
}

export function CollectResultPage({ summary }: { summary: CollectSummary }) {
  return (
    <>
      <p id="collect-summary">
        Asked to remove {summary.asked}; removed {summary.removed} ({bytes(summary.bytes_freed)} freed); refused{' '}
        {summary.refused}; {summary.unreachable} node{summary.unreachable === 1 ? '' : 's'} unreachable.
      </p>
      {summary.nodes.map((n) => (
        <Panel title={n.node}>
          {n.unreachable && <p class="error">Could not be asked: {n.unreachable}</p>}
          <ul>
            {n.removed.map((r) => (
              <li>
                removed <span class="mono">{r.path}</span> ({bytes(r.bytes_freed)})
              </li>
            ))}
            {n.refused.map((r) => (
              <li class="error">
                refused <span class="mono">{r.path}</span>: {r.reason} ({r.check})
              </li>
            ))}
          </ul>
        </Panel>
      ))}
      <p>
        <a href="/weights">Back to weights</a>
      </p>
    </>
  );
}
