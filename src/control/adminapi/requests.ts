// GET /api/v1/requests and /api/v1/requests/{id}: which replica served a
// request and why it failed, from the router's request log. The log is this
// control plane's memory (src/gateway/core/request-log.ts), so the answers say
// which instance answered; a request another instance took is not in it,
// and the 404 says where to ask instead.
import type { FastifyInstance } from 'fastify';
import type { RequestDetailView, RequestsView } from '../../api/types.js';
import { LlmgwError } from '../../errors/index.js';
import { requestDetailView, requestRecordView, type RequestFilter, type RequestLog } from '../../gateway/index.js';
import { z } from 'zod';
import { needs, type ZodTypeProvider } from '../../http/index.js';

export interface RequestsApiDeps {
  log: RequestLog;
  /** This control plane's instance id, as GET /api/v1/control-planes lists it. */
  instance: string;
  /** True when other control planes may serve clients too (a shared store): a miss may be theirs. */
  shared: boolean;
}

/** The list's query as the URL carries it: each a string, read by requestFilter (the dashboard's page reads it too). */
const RequestsQuery = z.object({
  id: z.string().optional(),
  model: z.string().optional(),
  status: z.string().optional(),
  failed: z.string().optional(),
  limit: z.string().optional(),
});
export type RequestsQuery = z.output<typeof RequestsQuery>;

export function registerRequestsApi(fastify: FastifyInstance, deps: RequestsApiDeps): void {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  app.get(
    '/api/v1/requests',
    { ...needs('fleet.read'), schema: { querystring: RequestsQuery } },
    async (request): Promise<RequestsView> => {
      return requestsView(deps, requestFilter(request.query));
    },
  );
  app.get(
    '/api/v1/requests/:id',
    { ...needs('fleet.read'), schema: { params: z.object({ id: z.string() }) } },
    async (request): Promise<RequestDetailView> => {
      const r = deps.log.get(request.params.id);
      if (!r) throw new LlmgwError('LLMGW_NOT_FOUND', requestMissing(deps, request.params.id));
      return requestDetailView(r, deps.log.countWithId(r.id) - 1);
    },
  );
}

export function requestsView(deps: RequestsApiDeps, filter: RequestFilter): RequestsView {
  return {
    requests: deps.log.list(filter).map(requestRecordView),
    instance: deps.instance,
    kept: deps.log.size,
    capacity: deps.log.capacity,
  };
}

/** Why a request id is not in the log, in words that say where else to look. */
export function requestMissing(deps: RequestsApiDeps, id: string): string {
  const where = deps.shared
    ? `; each control plane keeps its own log, so ask the one whose client listener took it (GET /api/v1/control-planes lists them)`
    : '';
  return `this control plane (${deps.instance}) has no request "${id}" in its log of the last ${deps.log.capacity} requests (it holds ${deps.log.size}): the id is mistyped, the request is older, it came before a restart, or it was refused before routing (a bad key, a rate limit, an invalid body: that answer said why)${where}; \`llmgw ctl requests\` lists the ones it holds`;
}

/** The query checked: a bad value is a 400 saying what to write. */
export function requestFilter(q: RequestsQuery): RequestFilter {
  const out: RequestFilter = {};
  if (q.id) out.id = q.id;
  if (q.model) out.model = q.model;
  if (q.status !== undefined && q.status !== '') {
    const n = Number(q.status);
    if (!/^\d{3}$/.test(q.status) || n < 100 || n > 599)
      throw new LlmgwError(
        'LLMGW_BAD_REQUEST',
        `status must be an HTTP status such as 502; got ${JSON.stringify(q.status)}`,
      );
    out.status = n;
  }
  if (q.failed !== undefined && q.failed !== '') {
    if (q.failed !== 'true' && q.failed !== 'false')
      throw new LlmgwError('LLMGW_BAD_REQUEST', `failed must be true or false; got ${JSON.stringify(q.failed)}`);
    out.failed = q.failed === 'true';
  }
  if (q.limit !== undefined && q.limit !== '') {
    const n = Number(q.limit);
    if (!/^\d+$/.test(q.limit) || n < 1 || n > 1000)
      throw new LlmgwError(
        'LLMGW_BAD_REQUEST',
        `limit must be a whole number from 1 to 1000; got ${JSON.stringify(q.limit)}`,
      );
    out.limit = n;
  }
  return out;
}
