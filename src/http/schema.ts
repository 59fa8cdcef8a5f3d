// Route schemas in zod: the one way a listener's route declares what its
// body, query and path parameters may be. Fastify runs the check before the
// handler (after the admin guard, which runs on onRequest), and the handler
// gets the parsed value, typed through `app.withTypeProvider<ZodTypeProvider>()`.
// A value that does not fit is answered 400 in the listener's shape, worded
// by src/validation's describeIssues, the same sentences the configuration
// and the catalog use.
//
// Written here rather than taken from fastify-type-provider-zod: that package
// names @fastify/swagger and openapi-types as required peer dependencies, so
// installing it installs them (and their own dependencies) for every user of
// llmgw, for OpenAPI documents llmgw does not serve. The part llmgw uses is a
// type and a validator compiler. Responses are not serialized through zod:
// every answer's bytes stay what JSON.stringify makes of the handler's value.
import type { FastifySchemaCompiler, FastifyTypeProvider } from 'fastify';
import { z } from 'zod';
import { LlmgwError } from '../errors/index.js';
import { describeIssues, formatPath } from '../validation/index.js';

/** Types a route's `request.body`, `.query` and `.params` from the zod schemas in its `schema`. */
export interface ZodTypeProvider extends FastifyTypeProvider {
  validator: this['schema'] extends z.ZodType ? z.output<this['schema']> : unknown;
  serializer: this['schema'] extends z.ZodType ? z.input<this['schema']> : unknown;
}

/**
 * A query's page size or count (`?limit=`, `?lines=`): a whole number from 1
 * to `max`, read from its text; absent = `fallback`. Anything else is refused
 * in the same words on every route.
 */
export function wholeNumberQuery(max: number, fallback: number) {
  const words = `want a whole number from 1 to ${max}`;
  return z.coerce.number(words).int(words).min(1, words).max(max, words).default(fallback);
}

/** A listing's `?order=`: oldest or newest first; absent = newest first, as OpenAI's lists are. */
export const listOrderQuery = z.enum(['asc', 'desc'], { error: 'want "asc" or "desc"' }).default('desc');

/** Which part of a request a route schema checks, as Fastify names it. */
export type RequestPart = 'body' | 'querystring' | 'params' | 'headers';

/**
 * A request part that does not fit its route's schema: 400, the message one
 * sentence per problem, joined with "; ". The error handler (src/http) puts
 * the route's `invalidBody` wording in front of a body's.
 */
export class RequestInvalidError extends LlmgwError {
  constructor(
    readonly part: RequestPart,
    readonly problems: readonly string[],
    /** The top-level field of the first problem, for an error shape that names one (OpenAI's `param`); null = the whole value. */
    readonly param: string | null = null,
  ) {
    super('LLMGW_BAD_REQUEST', problems.join('; '));
    this.name = 'RequestInvalidError';
  }
}

/** What describeIssues writes for a problem with the whole value rather than one field. */
const WHOLE_VALUE = `${formatPath([])}: `;

/**
 * One sentence per problem, each naming its field ("shards[0].state: ...").
 * A problem with the whole value (not an object, absent) is its message
 * alone: the route's wording, or the schema's own message, says what it is.
 */
export function requestProblems(schema: z.ZodType, error: z.ZodError): string[] {
  return describeIssues(schema, error).map((s) => (s.startsWith(WHOLE_VALUE) ? s.slice(WHOLE_VALUE.length) : s));
}

/**
 * The validator compiler for zod route schemas. Fastify hands an absent body
 * over as null; zod is shown it as absent (undefined), so a schema's
 * `.optional()` or `.prefault({})` says what no body means. (A body of
 * JSON `null` reads the same way, as an empty body already does.)
 */
export const zodValidatorCompiler: FastifySchemaCompiler<z.ZodType> = ({ schema, httpPart }) => {
  const part = (httpPart ?? 'body') as RequestPart;
  return (data: unknown) => {
    const result = schema.safeParse(part === 'body' && data === null ? undefined : data);
    if (result.success) return { value: result.data };
    const first = result.error.issues[0]?.path[0];
    const param = typeof first === 'string' || typeof first === 'number' ? String(first) : null;
    return { error: new RequestInvalidError(part, requestProblems(schema, result.error), param) };
  };
};
