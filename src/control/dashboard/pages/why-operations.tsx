// The pages for four of the operator's questions, each showing what the
// admin API answers (and `llmgw ctl` prints): which replica served a request
// and why it failed, where a node's disk went, what changed and who did it,
// and whether a new model would fit and where. Causes are sentences; absent
// numbers read "unknown", never 0.
import type {
  AuditView,
  DiskWeightsView,
  ModelPlansView,
  NodeDisksView,
  RequestRecordView,
  RequestsView,
} from '../../../api/types.js';
import { bytes, CsrfField, Empty, type PageContext, Panel, Unknown, Val } from '../components.js';

export function RequestsPage({ view, filter }: { view: RequestsView; filter: { model?: string; failed?: boolean } }) {
  return (
    <>
      <Panel title="Find a request" id="request-lookup">
        <form method="get" action="/requests/lookup">
          <input name="id" placeholder="x-request-id" size={40} /> <button type="submit">Show</button>
        </form>
        <p id="request-scope">
          This control plane ({view.instance}) keeps the last {view.capacity} requests in memory and holds {view.kept};
          another control plane keeps its own.{' '}
          {filter.failed ? <a href="/requests">Show all</a> : <a href="/requests?failed=true">Show only failed</a>}
        </p>
      </Panel>
      <Panel title={filter.model ? `Recent requests for ${filter.model}` : 'Recent requests'} id="requests">
        {view.requests.length === 0 ? (
          <Empty>No request matches.</Empty>
        ) : (
          <table>
            <thead>
              <tr>
                <th>Time</th>
                <th>Request</th>
                <th>Model</th>
                <th>Status</th>
                <th>Replica</th>
                <th>Nodes</th>
                <th>Attempts</th>
                <th>ms</th>
                <th>Cause</th>
              </tr>
            </thead>
            <tbody>
              {view.requests.map((r) => (
                <tr data-request={r.id}>
                  <td>{r.at}</td>
                  <td class="mono">
                    <a href={`/requests/${encodeURIComponent(r.id)}`}>{r.id}</a>
                  </td>
                  <td>{r.model}</td>
                  <td data-field="status" class={r.outcome === 'ok' ? undefined : 'error'}>
                    {r.outcome === 'ok' ? String(r.status) : `${r.status} ${r.outcome}`}
                  </td>
                  <td data-field="replica">
                    <Val v={r.replica} />
                  </td>
                  <td>
                    <Val v={r.nodes?.join(', ')} />
                  </td>
                  <td>{r.attempts.length}</td>
                  <td>{r.duration_ms}</td>
                  <td data-field="cause">{r.cause ?? ''}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Panel>
    </>
  );
}

export function RequestPage({ r }: { r: RequestRecordView }) {
  return (
    <>
      <Panel title="Verdict" id="request">
        <table class="details">
          <tbody>
            <tr>
              <th>Status</th>
              <td data-field="status" class={r.outcome === 'ok' ? undefined : 'error'}>
                {r.status} {r.outcome}
              </td>
            </tr>
            <tr>
              <th>Served by</th>
              <td data-field="replica">
                {r.replica
                  ? `replica ${r.replica}${r.nodes?.length ? ` on ${r.nodes.join(', ')}` : ''}${r.fallback ? ` (fallback ${r.fallback})` : ''}`
                  : 'no replica'}
              </td>
            </tr>
            <tr>
              <th>Cause</th>
              <td data-field="cause">{r.cause ?? 'none: it succeeded'}</td>
            </tr>
            {r.same_id ? (
              <tr>
                <th>Same id</th>
                <td data-field="same-id" class="error">
                  {r.same_id} earlier request(s) in the log carried this id too; this is the newest
                </td>
              </tr>
            ) : null}
            <tr>
              <th>Model</th>
              <td>
                {r.model} {r.endpoint}
                {r.stream ? ' (stream)' : ''}
                {r.key ? ` key ${r.key}…` : ''}
              </td>
            </tr>
            <tr>
              <th>Arrived</th>
              <td>{r.at}</td>
            </tr>
            <tr>
              <th>Time</th>
              <td>
                {r.duration_ms} ms in all
                {r.held_ms !== undefined ? `, ${r.held_ms} ms waiting for a replica to start` : ''}
                {r.ttft_ms !== undefined ? `, first byte after ${r.ttft_ms} ms` : ''}
              </td>
            </tr>
            <tr>
              <th>Tokens</th>
              <td>
                <Val v={r.prompt_tokens} unknown="unknown" /> prompt, <Val v={r.completion_tokens} unknown="unknown" />{' '}
                completion
              </td>
            </tr>
          </tbody>
        </table>
      </Panel>
      <Panel title={`Attempts (${r.attempts.length})`} id="attempts">
        {r.attempts.length === 0 ? (
          <Empty>No replica was tried.</Empty>
        ) : (
          <table>
            <thead>
              <tr>
                <th>#</th>
                <th>Model</th>
                <th>Replica</th>
                <th>Nodes</th>
                <th>Outcome</th>
                <th>ms</th>
                <th>Reason</th>
              </tr>
            </thead>
            <tbody>
              {r.attempts.map((a, i) => (
                <tr data-attempt={String(i + 1)}>
                  <td>{i + 1}</td>
                  <td>{a.model}</td>
                  <td>{a.replica}</td>
                  <td>
                    <Val v={a.nodes?.join(', ')} />
                  </td>
                  <td class={a.outcome === 'failed' ? 'error' : undefined}>{a.outcome}</td>
                  <td>{a.duration_ms}</td>
                  <td>
                    <Val v={a.reason} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Panel>
    </>
  );
}

function WeightsRows({ weights }: { weights: readonly DiskWeightsView[] }) {
  return (
    <table>
      <thead>
        <tr>
          <th>Size</th>
          <th>Kind</th>
          <th>Wanted by</th>
          <th>Last used</th>
          <th>Path</th>
        </tr>
      </thead>
      <tbody>
        {weights.map((w) => (
          <tr data-path={w.path}>
            <td>{w.size_bytes === undefined ? <Unknown text="unknown" /> : bytes(w.size_bytes)}</td>
            <td>{w.kind}</td>
            <td data-field="models" class={w.models.length === 0 && w.kind === 'cache' ? 'error' : undefined}>
              {w.models.length ? w.models.join(', ') : w.kind === 'cache' ? 'no model (orphan)' : 'no model'}
            </td>
            <td>
              <Val v={w.last_used} unknown="unknown" />
            </td>
            <td class="mono">{w.path}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function DisksPage({ view }: { view: NodeDisksView }) {
  return (
    <>
      <Panel title="Where the disk went" id="disk-summary">
        <ul>
          {view.summary.map((s) => (
            <li>{s}</li>
          ))}
        </ul>
        <p>
          <a href={`/nodes/${encodeURIComponent(view.node)}`}>Back to node {view.node}</a> ·{' '}
          <a href="/weights">Orphans and collect</a>
        </p>
      </Panel>
      {view.disks.map((d) => (
        <Panel title={`${d.mount_point}${d.shared ? ' (shared)' : ''}`} id={`disk-${d.mount_point}`}>
          <table class="details" data-mount={d.mount_point}>
            <tbody>
              <tr>
                <th>Used of total</th>
                <td data-field="used">
                  {bytes(d.used_bytes) ?? 'unknown'} of {bytes(d.total_bytes) ?? 'unknown'} (
                  {bytes(d.free_bytes) ?? 'unknown'} free)
                </td>
              </tr>
              <tr>
                <th>Weights a model wants</th>
                <td data-field="wanted">{bytes(d.wanted_bytes)}</td>
              </tr>
              <tr>
                <th>Orphans (collect reclaims)</th>
                <td data-field="orphans">{bytes(d.orphan_bytes)}</td>
              </tr>
              <tr>
                <th>Model dirs no model names</th>
                <td>{bytes(d.unused_model_dir_bytes)}</td>
              </tr>
              <tr>
                <th>Other files</th>
                <td data-field="other">{bytes(d.other_bytes) ?? <Unknown text="unknown" />}</td>
              </tr>
              <tr>
                <th>Agent directories here</th>
                <td class="mono">{d.paths.join(', ') || <Unknown text="none" />}</td>
              </tr>
            </tbody>
          </table>
          {d.weights.length > 0 && <WeightsRows weights={d.weights} />}
        </Panel>
      ))}
      {view.elsewhere.length > 0 && (
        <Panel title="On no reported filesystem" id="disk-elsewhere">
          <WeightsRows weights={view.elsewhere} />
        </Panel>
      )}
    </>
  );
}

export function AuditPage({
  view,
  query,
}: {
  view: AuditView;
  query: { since?: string; actor?: string; action?: string };
}) {
  return (
    <>
      <Panel title="Filter" id="audit-filter">
        <form method="get" action="/audit">
          since <input name="since" value={query.since ?? ''} placeholder="24h" size={10} /> actor{' '}
          <input name="actor" value={query.actor ?? ''} size={16} /> action{' '}
          <input name="action" value={query.action ?? ''} placeholder="node." size={16} />{' '}
          <button type="submit">Filter</button>
        </form>
      </Panel>
      <Panel title="Changes, newest first" id="audit">
        {!view.recorded ? (
          <Empty>This control plane has no store, so no change is recorded.</Empty>
        ) : view.entries.length === 0 ? (
          <Empty>No change matches.</Empty>
        ) : (
          <table>
            <thead>
              <tr>
                <th>Time</th>
                <th>Who</th>
                <th>Action</th>
                <th>Target</th>
                <th>What</th>
              </tr>
            </thead>
            <tbody>
              {view.entries.map((e) => (
                <tr data-audit={String(e.id)}>
                  <td>{e.at}</td>
                  <td data-field="who">{e.actor_label ? `${e.actor} (${e.actor_label})` : e.actor}</td>
                  <td data-field="action">{e.action}</td>
                  <td>{e.target}</td>
                  <td data-field="summary">{e.summary}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Panel>
    </>
  );
}

export function PlanFormPage({ ctx, text, problem }: { ctx: PageContext; text?: string; problem?: string }) {
  return (
    <Panel
      title="A model definition, as for `llmgw ctl plan FILE` (YAML or JSON; one model, a list, or {models: [...]})"
      id="plan-form"
    >
      {problem && (
        <p class="problem" id="plan-problem">
          {problem}
        </p>
      )}
      <form method="post" action="/models/plan">
        <CsrfField ctx={ctx} />
        <textarea name="definition" rows={14} cols={100}>
          {text ?? ''}
        </textarea>
        <p>
          <button type="submit" id="plan-submit">
            Plan (adds nothing)
          </button>
        </p>
      </form>
    </Panel>
  );
}

export function PlanResultPage({ ctx, text, view }: { ctx: PageContext; text: string; view: ModelPlansView }) {
  return (
    <>
      {view.models.map((m) => (
        <Panel title={m.name} id={`plan-${m.name}`}>
          <p data-field="verdict" class={m.placed.length < m.wanted ? 'error' : undefined}>
            {m.wanted === 0
              ? 'scaling.min is 0: nothing starts until a request arrives'
              : `${m.placed.length}/${m.wanted} replica(s) would be placed`}
          </p>
          {m.placed.map((r) => (
            <p data-field="placed">
              profile {r.profile}:{' '}
              {r.shards.map((s) => `${s.node} (GPUs ${s.gpus.length ? s.gpus.join(',') : 'none, CPU'})`).join(' + ')}
            </p>
          ))}
          {m.explain && <pre data-field="explain">{m.explain}</pre>}
          {(m.fit ?? []).map((f) => (
            <table data-profile={f.profile}>
              <thead>
                <tr>
                  <th colSpan={2}>
                    profile {f.profile} ({f.engine}
                    {f.shards > 1 ? `, ${f.shards} nodes per replica` : ''}): {f.fits.length} node(s) fit
                  </th>
                </tr>
              </thead>
              <tbody>
                {f.fits.map((n) => (
                  <tr data-node={n}>
                    <td>{n}</td>
                    <td data-field="why">fits</td>
                  </tr>
                ))}
                {f.rejected.map((r) => (
                  <tr data-node={r.node}>
                    <td>{r.node}</td>
                    <td data-field="why" class="error">
                      {r.reasons.join('; ')}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          ))}
        </Panel>
      ))}
      <PlanFormPage ctx={ctx} text={text} />
    </>
  );
}
