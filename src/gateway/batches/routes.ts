// /v1/files and /v1/batches on the client listener, in OpenAI's shapes (the
// `openai` client's files.* and batches.* calls). Behind the same key hook
// as inference: files and batches belong to the key's team, and another
// team's are answered 404. The routes only read the request and the key;
// keeping and running is the FilesAndBatches port's (src/control/batches).
// Registered only when the router is given that port.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { isLlmgwError, LlmgwError } from '../../errors/index.js';
import { addJsonParser, listOrderQuery, readForm, wholeNumberQuery, type ZodTypeProvider } from '../../http/index.js';
import { routeConfig } from '../core/dialect.js';
import { openai } from '../dialects/openai/index.js';
import { CreateBatchBodySchema, type BatchCaller, type FilesAndBatches } from '../ports/batches.js';

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

// The routes' declared query strings, path and bodies: checked before a handler runs, a misfit answered 400 in
// OpenAI's shape naming its field (`param`), as every route's on a listener of llmgw's.
const PageQuery = z.object({ limit: wholeNumberQuery(10_000, 20), after: z.string().optional() });
const FileListQuery = PageQuery.extend({ order: listOrderQuery, purpose: z.string().optional() });
const IdParams = z.object({ id: z.string() });
/** An upload's bytes as the multipart parser keeps them (src/gateway/core/upload.ts); the form is read in the handler. */
const NOT_A_FORM = 'send the file as multipart/form-data with fields file and purpose';
const UploadBody = z.instanceof(Buffer, { error: NOT_A_FORM });

/** Runs a handler; a refusal it throws goes to the client in OpenAI's shape, anything else to the listener's 500. */
async function answer(host: BatchRouteHost, reply: FastifyReply, work: () => Promise<unknown>): Promise<unknown> {
  try {
    return await work();
  } catch (err) {
    if (!isLlmgwError(err)) throw err;
    const param = typeof err.context.param === 'string' ? err.context.param : null;
    return host.refuse(reply, err.status, err.code, err.message, param);
  }
}

export function registerBatchRoutes(scope: FastifyInstance, service: FilesAndBatches, host: BatchRouteHost): void {
  const config = routeConfig(openai);
  const routes = scope.withTypeProvider<ZodTypeProvider>();

  routes.post(
    '/v1/files',
    { config, bodyLimit: service.fileMaxBytes + FORM_OVERHEAD_BYTES, schema: { body: UploadBody } },
    (request, reply) =>
      answer(host, reply, async () => {
        const contentType = request.headers['content-type'];
        if (!/^multipart\/form-data\b/i.test(contentType ?? ''))
          throw new LlmgwError('LLMGW_BAD_REQUEST', NOT_A_FORM, { status: 400 });
        const form = await readForm(request.body, contentType, { keepFiles: true });
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
  routes.get('/v1/files', { config, schema: { querystring: FileListQuery } }, (request, reply) => {
    const { limit, order, purpose, after } = request.query;
    return answer(host, reply, () =>
      service.listFiles(caller(request), {
        limit,
        order,
        ...(purpose ? { purpose } : {}),
        ...(after ? { after } : {}),
      }),
    );
  });
  routes.get('/v1/files/:id', { config, schema: { params: IdParams } }, (request, reply) =>
    answer(host, reply, () => service.getFile(caller(request), request.params.id)),
  );
  routes.get('/v1/files/:id/content', { config, schema: { params: IdParams } }, (request, reply) =>
    answer(host, reply, async () => {
      const stream = await service.fileContent(caller(request), request.params.id);
      return reply.header('content-type', 'application/jsonl').send(stream);
    }),
  );
  routes.delete('/v1/files/:id', { config, schema: { params: IdParams } }, (request, reply) =>
    answer(host, reply, () => service.deleteFile(caller(request), request.params.id)),
  );
  // The one JSON body here that llmgw reads rather than sends on as it came (the inference routes beside it keep
  // theirs as bytes): parsed in a scope of its own, so its schema is shown the value. The key hook, the dialect and
  // the checks of the intake hooks are the gateway scope's, inherited.
  scope.register(async (json) => {
    // No body at all is for the schema to name; a byte-order mark is dropped, as the inference routes drop it.
    json.removeContentTypeParser('application/json');
    addJsonParser(json, { dropByteOrderMark: true });
    json
      .withTypeProvider<ZodTypeProvider>()
      .post('/v1/batches', { config, schema: { body: CreateBatchBodySchema } }, (request, reply) =>
        answer(host, reply, () => service.createBatch(caller(request), request.body)),
      );
  });
  routes.get('/v1/batches', { config, schema: { querystring: PageQuery } }, (request, reply) => {
    const { limit, after } = request.query;
    return answer(host, reply, () => service.listBatches(caller(request), { limit, ...(after ? { after } : {}) }));
  });
  routes.get('/v1/batches/:id', { config, schema: { params: IdParams } }, (request, reply) =>
    answer(host, reply, () => service.getBatch(caller(request), request.params.id)),
  );
  routes.post('/v1/batches/:id/cancel', { config, schema: { params: IdParams } }, (request, reply) =>
    answer(host, reply, () => service.cancelBatch(caller(request), request.params.id)),
  );
}
