// The people page: who may use the admin listener, with which role, and
// whether their tokens still work. Reading it needs people.read; the one
// button (end a person's tokens now) is drawn only for people.write.
import type { PersonView } from '../../../api/people-types.js';
import { CsrfField, Empty, type PageContext, Panel } from '../components.js';

export function PeoplePage({ people, ctx }: { people: PersonView[]; ctx: PageContext }) {
  const mayChange = !ctx.may || ctx.may('people.write');
  return (
    <Panel title="People">
      {people.length === 0 ? (
        <Empty>
          Nobody yet: llmgw ctl people create NAME --role viewer makes one, or sign in through the identity provider.
        </Empty>
      ) : (
        <table id="people">
          <thead>
            <tr>
              <th>Name</th>
              <th>Role</th>
              <th>Teams</th>
              <th>Source</th>
              <th>Live tokens</th>
              <th>Created by</th>
              {mayChange && <th />}
            </tr>
          </thead>
          <tbody>
            {people.map((p) => {
              const live = p.tokens.filter((t) => t.state === 'active');
              return (
                <tr data-person={p.name}>
                  <td>{p.name}</td>
                  <td>{p.role}</td>
                  <td>{p.teams.join(', ') || '-'}</td>
                  <td>{p.source}</td>
                  <td>{live.length ? live.map((t) => `${t.prefix}… until ${t.expires_at}`).join('; ') : 'none'}</td>
                  <td>{p.created_by}</td>
                  {mayChange && (
                    <td>
                      {live.length > 0 && (
                        <form method="post" action={`/people/${encodeURIComponent(p.name)}/expire`} class="inline">
                          <CsrfField ctx={ctx} />
                          <button type="submit">End tokens</button>
                        </form>
                      )}
                    </td>
                  )}
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
    </Panel>
  );
}
