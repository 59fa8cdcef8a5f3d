// /v1/files and /v1/batches on the client listener, in OpenAI's shapes (the
// `openai` client's files.* and batches.* calls). Behind the same key hook
// as inference: files and batches belong to the key's team, and another
// team's are answered 404. The routes only read the request and the key;
// keeping and running is the FilesAndBatches port's (src/control/batches).
// Registered only when the router is given that port.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { isLlmgwError, LlmgwError } from '../../errors/index.js';
import { readForm } from '../../http/index.js';
import { routeConfig } from '../core/dialect.js';
import { openai } from '../dialects/openai/index.js';
import type { BatchCaller, FilesAndBatches } from '../ports/batches.js';

/** Room for a form's boundaries and fields around the file itself. */
const FORM_OVERHEAD_BYTES = 64 * 1024;

/** What the routes need of the router: its one way of refusing, in the route's dialect. */
export interface BatchRouteHost {
  refuse(
    reply: FastifyReply,
    status: number,
    code: LlmgwError['code'],
    message: string,
    param?: string | null,
  ): unknown;
}

function caller(request: FastifyRequest): BatchCaller {
  const key = request.apiKey;
  if (!key) return { keyId: 'anonymous' };
  return key.team === undefined ? { keyId: key.id } : { keyId: key.id, team: key.team };
}

function pageLimit(raw: unknown): number {
  if (raw === undefined) return 20;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > 10_000)
    throw new LlmgwError('LLMGW_BAD_REQUEST', 'limit must be a whole number from 1 to 10000', {
      status: 400,
      context: { param: 'limit' },
    });
  return n;
}

export function registerBatchRoutes(scope: FastifyInstance, service: FilesAndBatches, host: BatchRouteHost): void {
  const config = routeConfig(openai);
  /** Runs a handler; a refusal it throws goes to the client in OpenAI's shape, anything else to the listener's 500. */
  const handle =
    <R>(work: (request: FastifyRequest<R & { Params: { id: string } }>, reply: FastifyReply) => Promise<unknown>) =>
    async (request: FastifyRequest<R & { Params: { id: string } }>, reply: FastifyReply) => {
      try {
        return await work(request, reply);
      } catch (err) {
        if (!isLlmgwError(err)) throw err;
        const param = typeof err.context.param === 'string' ? err.context.param : null;
        return host.refuse(reply, err.status, err.code, err.message, param);
      }
    };

  scope.post(
    '/v1/files',
    { config, bodyLimit: service.fileMaxBytes + FORM_OVERHEAD_BYTES },
    handle(async (request) => {
      const contentType = request.headers['content-type'];
      if (!/^multipart\/form-data\b/i.test(contentType ?? ''))
        throw new LlmgwError('LLMGW_BAD_REQUEST', 'send the file as multipart/form-data with fields file and purpose', {
          status: 400,
        });
      const form = await readForm(request.body as Buffer, contentType, { keepFiles: true });
      const file = form.files.get('file');
      if (!file || file.bytes === null)
        throw new LlmgwError('LLMGW_BAD_REQUEST', 'the form has no file field: send the batch input as `file`', {
          status: 400,
          context: { param: 'file' },
        });
      const purpose = form.fields.purpose;
      if (purpose !== 'batch')
        throw new LlmgwError(
          'LLMGW_BAD_REQUEST',
          `purpose must be "batch" (the only files llmgw keeps), not ${JSON.stringify(purpose ?? null)}`,
          { status: 400, context: { param: 'purpose' } },
        );
      return service.uploadFile(caller(request), { filename: file.filename, purpose, bytes: file.bytes });
    }),
  );
  scope.get(
    '/v1/files',
    { config },
    handle<{ Querystring: Record<string, string | undefined> }>(async (request) => {
      const q = request.query;
      const order = q.order ?? 'desc';
      if (order !== 'asc' && order !== 'desc')
        throw new LlmgwError('LLMGW_BAD_REQUEST', 'order must be asc or desc', {
          status: 400,
          context: { param: 'order' },
        });
      return service.listFiles(caller(request), {
        limit: pageLimit(q.limit),
        order,
        ...(q.purpose ? { purpose: q.purpose } : {}),
        ...(q.after ? { after: q.after } : {}),
      });
    }),
  );
  scope.get(
    '/v1/files/:id',
    { config },
    handle(async (request) => service.getFile(caller(request), request.params.id)),
  );
  scope.get(
    '/v1/files/:id/content',
    { config },
    handle(async (request, reply) => {
      const stream = await service.fileContent(caller(request), request.params.id);
      return reply.header('content-type', 'application/jsonl').send(stream);
    }),
  );
  scope.delete(
    '/v1/files/:id',
    { config },
    handle(async (request) => service.deleteFile(caller(request), request.params.id)),
  );
  scope.post(
    '/v1/batches',
    { config },
    handle(async (request) => {
      let body: unknown;
      try {
        body = JSON.parse((request.body as Buffer | undefined)?.toString('utf8') ?? '');
      } catch {
        throw new LlmgwError('LLMGW_INVALID_JSON', 'the body is not valid JSON', { status: 400 });
      }
      return service.createBatch(caller(request), body);
    }),
  );
  scope.get(
    '/v1/batches',
    { config },
    handle<{ Querystring: Record<string, string | undefined> }>(async (request) =>
      service.listBatches(caller(request), {
        limit: pageLimit(request.query.limit),
        ...(request.query.after ? { after: request.query.after } : {}),
      }),
    ),
  );
  scope.get(
    '/v1/batches/:id',
    { config },
    handle(async (request) => service.getBatch(caller(request), request.params.id)),
  );
  scope.post(
    '/v1/batches/:id/cancel',
    { config },
    handle(async (request) => service.cancelBatch(caller(request), request.params.id)),
  );
}
