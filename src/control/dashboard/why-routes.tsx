// The dashboard's routes for four of the operator's questions (requests,
// a node's disks, the audit log, a plan), registered into the dashboard's
// scope with its own page and form helpers so they share its session, CSRF
// and error handling. Each page renders what the admin API's own function
// answers, so it cannot disagree with ctl.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { parse as parseYaml } from 'yaml';
import { isLlmgwError } from '../../errors/index.js';
import {
  auditView,
  type AuditQuery,
  type AuditSource,
  nodeDisksView,
  planView,
  requestFilter,
  requestMissing,
  requestsView,
  type RequestsApiDeps,
} from '../adminapi/index.js';
import { requestDetailView } from '../../gateway/index.js';
import type { PageContext } from './components.js';
import type { DashboardSources } from './data.js';
import { MessagePage } from './pages/login.js';
import {
  AuditPage,
  DisksPage,
  PlanFormPage,
  PlanResultPage,
  RequestPage,
  RequestsPage,
} from './pages/why-operations.js';
import { TimelinePanels } from './pages/request-timeline.js';
import type { PageSpec } from './routes.js';

export interface WhySources extends DashboardSources {
  /** The store's audit log; absent = no store, and the audit page says nothing is recorded. */
  audit?: AuditSource;
  /** The router's request log; absent = the requests pages say none is kept. */
  requestLog?: RequestsApiDeps;
  now: () => number;
}

type Handler = (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply>;
type Page = (build: (request: FastifyRequest, ctx: PageContext) => PageSpec | Promise<PageSpec>) => Handler;
type Action = (
  act: (
    request: FastifyRequest,
    form: Record<string, string | undefined>,
    session: unknown,
    ctx: PageContext,
  ) => Promise<PageSpec | { redirect: string }>,
) => Handler;

export function registerWhyPages(
  scope: FastifyInstance,
  options: WhySources,
  page: Page,
  action: Action,
  access: { config: { access: 'session' } },
): void {
  const noLog: PageSpec = {
    title: 'Requests',
    section: '/requests',
    refresh: false,
    body: <MessagePage message="This control plane keeps no request log." />,
  };
  scope.get(
    '/requests',
    access,
    page((request) => {
      if (!options.requestLog) return noLog;
      const q = request.query as { model?: string; failed?: string };
      const filter = requestFilter({
        ...(q.model ? { model: q.model } : {}),
        ...(q.failed ? { failed: q.failed } : {}),
        limit: '200',
      });
      return {
        title: 'Requests',
        section: '/requests',
        refresh: true,
        body: <RequestsPage view={requestsView(options.requestLog, filter)} filter={filter} />,
      };
    }),
  );
  scope.get('/requests/lookup', access, async (request, reply) => {
    const id = ((request.query as { id?: string }).id ?? '').trim();
    return reply.redirect(id ? `/requests/${encodeURIComponent(id)}` : '/requests', 303);
  });
  scope.get(
    '/requests/:id',
    access,
    page((request) => {
      if (!options.requestLog) return noLog;
      const id = (request.params as { id: string }).id;
      const r = options.requestLog.log.get(id);
      if (!r)
        return {
          title: 'No such request',
          section: '/requests',
          refresh: false,
          status: 404,
          body: <MessagePage message={requestMissing(options.requestLog, id)} back="/requests" />,
        };
      const detail = requestDetailView(r, options.requestLog.log.countWithId(r.id) - 1);
      return {
        title: `Request ${id}`,
        section: '/requests',
        refresh: true,
        body: (
          <>
            <RequestPage r={detail} />
            <TimelinePanels r={detail} />
          </>
        ),
      };
    }),
  );
  scope.get(
    '/nodes/:id/disks',
    access,
    page((request) => {
      const id = (request.params as { id: string }).id;
      const node = options.admin.inventory?.get(id);
      if (!node)
        return {
          title: 'No such node',
          section: '/nodes',
          refresh: false,
          status: 404,
          body: <MessagePage message={`No node "${id}" has joined this control plane.`} back="/nodes" />,
        };
      return {
        title: `Disks of ${id}`,
        section: '/nodes',
        refresh: true,
        body: <DisksPage view={nodeDisksView(id, node.report, options.admin.catalog.models())} />,
      };
    }),
  );
  scope.get(
    '/audit',
    access,
    page(async (request) => {
      const q = request.query as AuditQuery;
      const query = {
        ...(q.since ? { since: q.since } : {}),
        ...(q.actor ? { actor: q.actor } : {}),
        ...(q.action ? { action: q.action } : {}),
      };
      const view = await auditView(
        { ...(options.audit ? { audit: options.audit } : {}), now: options.now },
        { ...query, limit: '200' },
      );
      return { title: 'Audit', section: '/audit', refresh: true, body: <AuditPage view={view} query={query} /> };
    }),
  );
  scope.get(
    '/models/plan',
    access,
    page((_request, ctx) => ({
      title: 'Will it fit?',
      section: '/models',
      refresh: false,
      body: <PlanFormPage ctx={ctx} />,
    })),
  );
  scope.post(
    '/models/plan',
    access,
    action(async (_request, form, _session, ctx) => {
      const text = form.definition ?? '';
      const problem = (message: string): PageSpec => ({
        title: 'Will it fit?',
        section: '/models',
        refresh: false,
        status: 400,
        body: <PlanFormPage ctx={ctx} text={text} problem={message} />,
      });
      let input: unknown;
      try {
        input = parseYaml(text);
      } catch (err) {
        return problem(`The definition is neither YAML nor JSON: ${(err as Error).message}`);
      }
      if (Array.isArray(input)) input = { models: input };
      try {
        const view = planView(options.admin, input);
        return {
          title: 'Will it fit?',
          section: '/models',
          refresh: false,
          body: <PlanResultPage ctx={ctx} text={text} view={view} />,
        };
      } catch (err) {
        if (isLlmgwError(err) && err.status < 500) return problem(err.message);
        throw err;
      }
    }),
  );
}
