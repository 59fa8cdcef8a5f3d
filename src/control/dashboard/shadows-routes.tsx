// The dashboard's shadows page, registered into the dashboard's scope with
// its page helper so it shares its session and error handling. It renders
// what GET /api/v1/shadows answers (adminapi/shadows.ts), so it cannot
// disagree with ctl.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { shadowsView, type ShadowsApiDeps } from '../adminapi/shadows.js';
import type { PageContext } from './components.js';
import { ShadowsPage } from './pages/shadows.js';
import type { PageSpec } from './routes.js';

type Handler = (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply>;
type Page = (build: (request: FastifyRequest, ctx: PageContext) => PageSpec | Promise<PageSpec>) => Handler;

/** `deps` absent = the page says no comparison is kept here. */
export function registerShadowPages(
  scope: FastifyInstance,
  deps: ShadowsApiDeps | undefined,
  page: Page,
  access: { config: { access: 'session' } },
): void {
  scope.get(
    '/shadows',
    access,
    page(() => ({
      title: 'Shadows',
      section: '/models',
      refresh: true,
      body: deps ? (
        <ShadowsPage view={shadowsView(deps)} />
      ) : (
        <ShadowsPage view={{ shadows: [], instance: 'none', samples_kept: 0 }} />
      ),
    })),
  );
}
