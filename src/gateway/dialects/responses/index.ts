// OpenAI's Responses API as a dialect of the gateway: POST /v1/responses,
// its conversation continued from kept answers (keeper.ts) and translated
// to Chat Completions at admission (call.ts), sent as it is to an engine
// that serves the API itself (native.ts) and as chat to any other, its
// answer relayed back by the relays in relay.ts; GET and DELETE of a kept
// response, and its input items. Refusals are in OpenAI's error shape,
// which the Responses API shares. The pure translations of the request,
// the answer and the stream are listed in translations.ts.
import { z } from 'zod';
import type { ZodTypeProvider } from '../../../http/index.js';
import { openAiErrorBody, openAiErrorShape } from '../../core/errors.js';
import { callHook } from '../../core/admission.js';
import { rateLimitHook } from '../../core/limits-hook.js';
import { routeConfig, type Dialect } from '../../core/dialect.js';
import { fromResponses, previousResponseHook } from './call.js';
import { InputItemsQuery, ResponseKeeper } from './keeper.js';
import { RESPONSES_PARAMS } from './translations.js';

export * from './translations.js';

export const responses: Dialect = {
  name: 'responses',
  errorBody: (status, code, message, param) => openAiErrorBody(message, code, status, param),
  params: RESPONSES_PARAMS,
  errorShape: openAiErrorShape,
  routes(scope, gw) {
    const keeper = new ResponseKeeper(gw.responseStore, gw.logger, gw.options.now, (...args) => gw.refuse(...args));
    // Responses still being written to the store finish first: their clients have them and may continue from them.
    scope.addHook('onClose', async () => keeper.close());
    const admission = gw.admission();
    const config = routeConfig(responses);
    // The previous response loaded (by key) before the body is translated to chat for the checks.
    scope.post(
      '/v1/responses',
      {
        bodyLimit: gw.options.bodyLimitBytes,
        config,
        preHandler: [
          previousResponseHook(keeper),
          callHook(admission, 'responses', fromResponses(keeper)),
          rateLimitHook(admission),
        ],
      },
      (request, reply) => gw.infer(request, reply),
    );
    // Its stored responses, by id: the path and query declared, as every route's on the listener.
    const stored = scope.withTypeProvider<ZodTypeProvider>();
    const params = z.object({ id: z.string() });
    stored.get('/v1/responses/:id', { config, schema: { params } }, async (request, reply) =>
      keeper.getResponse(request.params.id, request, reply),
    );
    stored.get(
      '/v1/responses/:id/input_items',
      { config, schema: { params, querystring: InputItemsQuery } },
      async (request, reply) => keeper.listInputItems(request.params.id, request.query, request, reply),
    );
    stored.delete('/v1/responses/:id', { config, schema: { params } }, async (request, reply) =>
      keeper.deleteResponse(request.params.id, request, reply),
    );
  },
};
