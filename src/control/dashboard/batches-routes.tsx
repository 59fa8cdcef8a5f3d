// The dashboard's batches page, registered into the dashboard's scope with
// its page helper so it shares its session and error handling. It renders
// what GET /api/v1/batches answers (src/control/batches/admin-api.ts), for
// the same owners (a team-admin: its teams'), so it cannot disagree with ctl.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { batchesView, ownersInScope, type BatchesAdminDeps } from '../batches/admin-api.js';
import type { PageContext } from './components.js';
import { BatchesPage } from './pages/batches.js';
import type { PageSpec } from './routes.js';

type Handler = (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply>;
type Page = (build: (request: FastifyRequest, ctx: PageContext) => PageSpec | Promise<PageSpec>) => Handler;

/** `deps` absent = no store, no batches: the page says none exist. */
export function registerBatchPages(scope: FastifyInstance, deps: BatchesAdminDeps | undefined, page: Page): void {
  scope.get(
    '/batches',
    { config: { access: 'session', permission: 'batches.read' } },
    page(async (request) => ({
      title: 'Batches',
      section: '/batches',
      refresh: true,
      body: (
        <BatchesPage
          view={deps ? await batchesView(deps, ownersInScope(request)) : { batches: [] }}
          nowMs={deps ? deps.now() : Date.now()}
        />
      ),
    })),
  );
}
