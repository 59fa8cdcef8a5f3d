// The dashboard's teams, budgets and spend pages, registered into the
// dashboard's scope with its page helper so they share its session and
// error handling. Each declares the permission its API route needs (a
// viewer reads them all), and renders what that route answers, cut to a
// team-admin's teams through the same teamsInScope the API uses.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TeamView } from '../../api/money-types.js';
import type { ApiKeyRecord } from '../../gateway/ports/index.js';
import { teamsInScope } from '../../http/index.js';
import type { MoneyViews } from '../budgets/views.js';
import { teamViews, type TeamRecord } from '../teams/teams.js';
import type { PageContext } from './components.js';
import { BudgetsPage, SpendPage, TeamsPage } from './pages/money.js';
import type { PageSpec } from './routes.js';

type Handler = (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply>;
type Page = (build: (request: FastifyRequest, ctx: PageContext) => PageSpec | Promise<PageSpec>) => Handler;

export interface MoneyPagesDeps {
  teams: { list(): readonly TeamRecord[] };
  keys: () => readonly ApiKeyRecord[] | Promise<readonly ApiKeyRecord[]>;
  views: MoneyViews;
  now: () => number;
}

const need = (permission: 'teams.read' | 'budgets.read' | 'usage.read') =>
  ({ config: { access: 'session', permission } }) as const;

/** `deps` absent = a dashboard built without them (a unit test's): the pages are not registered. */
export function registerMoneyPages(scope: FastifyInstance, deps: MoneyPagesDeps | undefined, page: Page): void {
  if (!deps) return;
  scope.get(
    '/teams',
    need('teams.read'),
    page(async (request) => {
      const teams = teamsInScope(request);
      // As GET /api/v1/teams answers it.
      const listed = teamViews(deps.teams.list(), await deps.keys(), deps.now(), teams) as unknown as TeamView[];
      return {
        title: 'Teams',
        section: '/teams',
        refresh: true,
        body: <TeamsPage teams={listed} scope={teams} />,
      };
    }),
  );
  scope.get(
    '/budgets',
    need('budgets.read'),
    page(async (request) => {
      const teams = teamsInScope(request);
      return {
        title: 'Budgets',
        section: '/budgets',
        refresh: true,
        body: <BudgetsPage budgets={await deps.views.budgets(teams)} scope={teams} />,
      };
    }),
  );
  scope.get(
    '/spend',
    need('usage.read'),
    page(async (request) => {
      const teams = teamsInScope(request);
      return {
        title: 'Spend',
        section: '/spend',
        refresh: true,
        body: <SpendPage spend={await deps.views.spend(teams)} scope={teams} />,
      };
    }),
  );
}
