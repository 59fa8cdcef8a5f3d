// Request bodies on the agent's management listener: a route declares its
// body in zod (src/http/schema.ts), as the control plane's listeners do, and
// a body that does not fit is answered 400 in this listener's own shape,
// {"error": "..."}. Apart from agent.ts so that the routes' tests build the
// listener the way the agent does. The listener is a plain Fastify, not
// src/http's createJsonApp: every other error keeps Fastify's own answer.
import type { FastifyInstance } from 'fastify';
import { RequestInvalidError, zodValidatorCompiler, type RouteJsonWording } from '../http/index.js';

/** Lets `app`'s routes declare zod schemas (typed through ZodTypeProvider) and words a body that does not fit. */
export function declareMgmtBodies(app: FastifyInstance): void {
  app.setValidatorCompiler(zodValidatorCompiler);
  app.setErrorHandler((error, request, reply) => {
    // Thrown on, an error reaches Fastify's own handler: invalid JSON, 413 and 415 answer as they always have.
    if (!(error instanceof RequestInvalidError) || error.part !== 'body') throw error;
    const what = (request.routeOptions.config as RouteJsonWording | undefined)?.invalidBody;
    return reply.code(400).send({ error: what ? `${what}: ${error.message}` : error.message });
  });
}
