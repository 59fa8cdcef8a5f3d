// The pages an organisation's budget holder reads: teams and their limits,
// budgets with what their period used of the amount and when it resets, and
// spend per team, key and model with the measured cost per million tokens.
// The same figures `llmgw ctl teams`, `ctl budgets` and `ctl usage --by`
// print (GET /api/v1/teams, /budgets, /spend), cut to a team-admin's teams.
import type { BudgetView, SpendLine, SpendView, TeamView } from '../../../api/money-types.js';
import { Bar, Empty, Panel, Unknown } from '../components.js';

/** Dollars as ctl prints them: cents, or six places for a fraction of a cent. */
export function usd(n: number): string {
  return `$${n.toFixed(n !== 0 && Math.abs(n) < 0.01 ? 6 : 2)}`;
}

/** GPU-hours to two places, or two significant digits under a hundredth: a fresh replica's seconds are not 0.00. */
export function gpuHours(n: number): string {
  return n !== 0 && Math.abs(n) < 0.01 ? n.toPrecision(2) : n.toFixed(2);
}

function amount(unit: 'tokens' | 'usd', n: number): string {
  return unit === 'usd' ? usd(n) : `${Math.round(n).toLocaleString('en-US')} tokens`;
}

/** Who the page is cut to, said under it so a team-admin knows what it does not see. */
function ScopeNote({ scope }: { scope: readonly string[] | null }) {
  return scope === null ? null : (
    <p class="empty" id="scope-note">
      Shown for your teams only: {scope.length ? scope.join(', ') : 'none'}.
    </p>
  );
}

export function TeamsPage({
  teams,
  scope,
}: {
  teams: (TeamView & { weight?: number })[];
  scope: readonly string[] | null;
}) {
  return (
    <Panel title="Teams" id="teams">
      {teams.length === 0 ? (
        <Empty>No team to show. llmgw ctl teams create NAME makes one.</Empty>
      ) : (
        <table>
          <thead>
            <tr>
              <th>Team</th>
              <th>Models</th>
              <th>Requests / min per key</th>
              <th>Tokens / min per key</th>
              <th>Fair-share weight</th>
              <th>Live keys</th>
              <th>Created</th>
            </tr>
          </thead>
          <tbody>
            {teams.map((t) => (
              <tr data-team={t.name}>
                <td>{t.name}</td>
                <td>{t.allowed_models === null ? 'every model' : t.allowed_models.join(', ') || 'none'}</td>
                <td>{t.requests_per_minute ?? <Unknown text="no ceiling" />}</td>
                <td>{t.tokens_per_minute ?? <Unknown text="no ceiling" />}</td>
                <td>{t.weight ?? 1}</td>
                <td data-field="keys">{t.keys}</td>
                <td>
                  {t.created_at} by {t.created_by}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <ScopeNote scope={scope} />
    </Panel>
  );
}

export function BudgetsPage({ budgets, scope }: { budgets: BudgetView[]; scope: readonly string[] | null }) {
  return (
    <Panel title="Budgets" id="budgets">
      {budgets.length === 0 ? (
        <Empty>No budget yet. llmgw ctl budgets create --team NAME --tokens N --per day makes one.</Empty>
      ) : (
        <table>
          <thead>
            <tr>
              <th>Budget</th>
              <th>On</th>
              <th>Enforce</th>
              <th>Used / limit this {budgets.every((b) => b.period === 'day') ? 'day' : 'period'}</th>
              <th>Resets at (UTC)</th>
            </tr>
          </thead>
          <tbody>
            {budgets.map((b) => {
              const used = b.amount > 0 ? b.spent / b.amount : 0;
              return (
                <tr data-budget={b.id} class={used >= 1 ? 'error' : undefined}>
                  <td class="mono">{b.id}</td>
                  <td>
                    {b.scope} {b.subject}
                  </td>
                  <td>
                    {b.enforce === 'hard' ? 'hard: 429 past it' : `soft: alert at ${Math.round(b.alert_at * 100)}%`}
                  </td>
                  <td data-field="used">
                    <Bar
                      used={b.spent}
                      total={b.amount}
                      label={`${amount(b.unit, b.spent)} of ${amount(b.unit, b.amount)} per ${b.period} (${Math.round(used * 100)}%)`}
                    />
                  </td>
                  <td data-field="resets">{b.resets_at}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
      <p class="empty">
        Used as the store knows it: each control plane reports what its leases spent every few seconds, so a hard budget
        may be overshot by at most one lease per control plane.
      </p>
      <ScopeNote scope={scope} />
    </Panel>
  );
}

const SpendHead = () => (
  <>
    <th>Requests</th>
    <th>Tokens in / out</th>
    <th>Spent</th>
  </>
);

function SpendCells({ l }: { l: SpendLine }) {
  return (
    <>
      <td>{l.requests}</td>
      <td>
        {l.prompt_tokens} / {l.completion_tokens}
      </td>
      <td data-field="cost">{usd(l.cost_usd)}</td>
    </>
  );
}

export function SpendPage({ spend, scope }: { spend: SpendView; scope: readonly string[] | null }) {
  return (
    <>
      <Panel title="Spend per team" id="spend-teams">
        {spend.teams.length === 0 ? (
          <Empty>Nothing spent yet.</Empty>
        ) : (
          <table>
            <thead>
              <tr>
                <th>Team</th>
                <SpendHead />
              </tr>
            </thead>
            <tbody>
              {spend.teams.map((t) => (
                <tr data-team={t.team}>
                  <td>{t.team}</td>
                  <SpendCells l={t} />
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Panel>
      <Panel title="Spend per model, and what a million tokens cost" id="spend-models">
        {spend.models.length === 0 ? (
          <Empty>No model has served a token yet.</Empty>
        ) : (
          <table>
            <thead>
              <tr>
                <th>Model</th>
                <SpendHead />
                <th>Price in / out per 1M</th>
                <th>GPU-hours</th>
                <th>GPU cost</th>
                <th>Measured per 1M tokens</th>
              </tr>
            </thead>
            <tbody>
              {spend.models.map((m) => (
                <tr data-model={m.model}>
                  <td>
                    <a href={`/models/${encodeURIComponent(m.model)}`}>{m.model}</a>
                  </td>
                  <SpendCells l={m} />
                  <td>
                    {m.price
                      ? `${usd(m.price.input_per_million)} / ${usd(m.price.output_per_million)}`
                      : 'from GPU-hours'}
                  </td>
                  <td data-field="gpu-hours">{gpuHours(m.gpu_hours)}</td>
                  <td>{usd(m.gpu_cost_usd)}</td>
                  <td data-field="measured">
                    {m.measured_usd_per_million === null ? (
                      <Unknown text="no tokens yet" />
                    ) : (
                      usd(m.measured_usd_per_million)
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Panel>
      <Panel title="Spend per key" id="spend-keys">
        {spend.keys.length === 0 ? (
          <Empty>No key has spent anything yet.</Empty>
        ) : (
          <table>
            <thead>
              <tr>
                <th>Key</th>
                <th>Team</th>
                <SpendHead />
              </tr>
            </thead>
            <tbody>
              {spend.keys.map((k) => (
                <tr data-key={k.key_id}>
                  <td class="mono">{k.key_id}</td>
                  <td>{k.team}</td>
                  <SpendCells l={k} />
                </tr>
              ))}
            </tbody>
          </table>
        )}
        <p class="empty">
          US dollars at the prices in force when each request ran, counted since the store was made. A model with no
          token price is charged its replicas' GPU-hours at gpu_prices, spread over the tokens they served.
        </p>
        <ScopeNote scope={scope} />
      </Panel>
    </>
  );
}
