// OpenAI's API as a dialect of the gateway, and the one the engines speak:
// its inference routes are relayed byte for byte (relay.ts), with only the
// model renamed and stream_options or max_tokens appended where the gateway
// must (dispatch.ts); /v1/models lists what the key may use. Its error
// shape (../../errors.ts) is the one the official SDKs parse. Also the
// turn of every request whose dialect translates nothing (OPENAI_TURN).
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { ZodTypeProvider } from '../../../http/index.js';
import { allows, callHook } from '../../core/admission.js';
import { rateLimitHook } from '../../core/limits-hook.js';
import { withholdsUsage } from '../../core/dispatch.js';
import { openAiErrorBody, openAiErrorShape } from '../../core/errors.js';
import { RelayHandler } from '../../core/relay.js';
import { WholeAnswerRelay } from '../../core/relay-whole.js';
import type { Endpoint } from '../../core/validate.js';
import { routeConfig, type Dialect, type DialectHost, type DialectTurn } from '../../core/dialect.js';
import { anthropic } from '../anthropic/index.js';
import { anthropicModelInfo, anthropicModelPage, asksAnthropicModels } from '../anthropic/models.js';
import { LlmgwError } from '../../../errors/index.js';

/** A request sent as the client wrote it, to every engine, its answer relayed as bytes: one object for all of them. */
export const OPENAI_TURN: DialectTurn = Object.freeze<DialectTurn>({
  native: () => null,
  // A whole answer has a relay of its own, without a stream's machinery (relay-whole.ts).
  relay: (a, hooks, resolve) =>
    a.ex.parsed.stream
      ? new RelayHandler(a.ex, hooks, resolve, withholdsUsage(a.ex))
      : new WholeAnswerRelay(a.ex, hooks, resolve),
});

/** The models routes' paths: where an Anthropic client (anthropic-version) is answered in its own API's shape. */
const MODELS_ROUTES = new Set(['/v1/models', '/v1/models/*']);

/** GET /v1/models: the models (and aliases) this key may use; a page in Anthropic's shape for its clients. */
function listModels(gw: DialectHost, request: FastifyRequest, reply: FastifyReply): unknown {
  const key = request.apiKey;
  const data: { id: string; object: 'model'; created: number; owned_by: 'llmgw'; root: string }[] = [];
  for (const m of gw.catalog.models()) {
    if (key && !allows(key, m)) continue;
    for (const id of [m.name, ...m.aliases])
      data.push({ id, object: 'model', created: gw.createdS, owned_by: 'llmgw', root: m.name });
  }
  if (request.dialect !== anthropic) return { object: 'list', data };
  try {
    return anthropicModelPage(
      data.map((d) => d.id),
      gw.createdS,
      request.query,
    );
  } catch (err) {
    if (!(err instanceof LlmgwError)) throw err;
    return gw.refuse(reply, err.status, err.code, err.message);
  }
}

/** GET /v1/models/{id}: one entry, by name or alias, if this key may use it. */
function getModel(gw: DialectHost, id: string, request: FastifyRequest, reply: FastifyReply): unknown {
  const key = request.apiKey;
  const m = gw.catalog.resolve(id);
  if (!m || (key && !allows(key, m))) {
    return gw.refuse(
      reply,
      404,
      'LLMGW_MODEL_NOT_FOUND',
      `The model \`${id}\` does not exist. GET /v1/models lists the models this key may use.`,
      'model',
    );
  }
  if (request.dialect === anthropic) return anthropicModelInfo(id, gw.createdS);
  return { id, object: 'model', created: gw.createdS, owned_by: 'llmgw', root: m.name };
}

export const openai: Dialect = {
  name: 'openai',
  errorBody: (status, code, message, param) => openAiErrorBody(message, code, status, param),
  errorShape: openAiErrorShape,
  onRequest(request, reply) {
    // Anthropic's clients list models at OpenAI's paths: from here on (the key read from x-api-key, every
    // refusal, the answer) such a request is Anthropic's. A header read on the other routes, nothing more.
    if (!asksAnthropicModels(request) || !MODELS_ROUTES.has(request.routeOptions.url ?? '')) return;
    request.dialect = anthropic;
    anthropic.onRequest?.(request, reply);
  },
  routes(scope, gw) {
    const admission = gw.admission();
    const bodyLimit = gw.options.bodyLimitBytes;
    const config = routeConfig(openai);
    const rateLimit = rateLimitHook(admission);
    const inference = (endpoint: Endpoint) => ({
      bodyLimit,
      config,
      preHandler: [callHook(admission, endpoint), rateLimit],
    });
    const infer = (request: FastifyRequest, reply: FastifyReply) => gw.infer(request, reply);
    scope.get('/v1/models', { config }, async (request, reply) => listModels(gw, request, reply));
    // RoutedModel names may hold "/" (org/name), so the id is the rest of the path.
    scope
      .withTypeProvider<ZodTypeProvider>()
      .get('/v1/models/*', { config, schema: { params: z.object({ '*': z.string() }) } }, async (request, reply) =>
        getModel(gw, request.params['*'], request, reply),
      );
    scope.post('/v1/chat/completions', inference('chat'), infer);
    scope.post('/v1/completions', inference('completions'), infer);
    scope.post('/v1/embeddings', inference('embeddings'), infer);
    // Pass-through endpoints: relayed as the engine answers, through the same checks. Rerank answers on vLLM's three paths.
    for (const path of ['/v1/rerank', '/rerank', '/v2/rerank']) scope.post(path, inference('rerank'), infer);
    scope.post('/v1/score', inference('score'), infer);
    // An upload (an audio file) is larger than any JSON body: its own limit, on its one route, its form read as it arrives.
    scope.post(
      '/v1/audio/transcriptions',
      {
        ...inference('transcriptions'),
        bodyLimit: Math.max(bodyLimit, gw.options.uploadLimitBytes),
        config: routeConfig(openai, { multipartForm: true }),
      },
      infer,
    );
    scope.post('/tokenize', inference('tokenize'), infer);
    scope.post('/detokenize', inference('detokenize'), infer);
  },
};
