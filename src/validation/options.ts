// The first step of every compileXOptions(): check what the user wrote
// against its zod schema and, when it does not fit, throw every problem at
// once, worded by describeIssues. One function, so that the agent, the probe,
// the engines, the dev tools and the configuration refuse options the same
// way and no compiler carries its own copy of safeParse-then-throw.
// Request bodies take the other path (src/http/schema.ts): they answer 400 in
// their listener's shape instead of throwing a ValidationError.
import type { z } from 'zod';
import { ValidationError, type ErrorCode } from '../errors/index.js';
import { describeIssues } from './index.js';

/**
 * `input` parsed by `schema`: zod's output, defaults filled. When it does not
 * fit, throws ValidationError (`code`, LLMGW_CONFIG_INVALID when absent)
 * whose message is `lead`, then one sentence per problem ("models[1]: ...",
 * "parralel: unknown field; did you mean "parallel"?"), and whose `problems`
 * are those sentences, for a caller that rewords them (the sim engine's flags).
 */
export function parseOptions<S extends z.ZodType>(
  schema: S,
  input: unknown,
  lead: string,
  code: ErrorCode = 'LLMGW_CONFIG_INVALID',
): z.output<S> {
  const parsed = schema.safeParse(input);
  if (!parsed.success) throw new ValidationError(code, describeIssues(schema, parsed.error), lead);
  return parsed.data;
}
