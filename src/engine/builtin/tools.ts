// Tools and structured output for the builtin engine: what OpenAI's `tools`,
// `tool_choice`, `parallel_tool_calls` and `response_format` ask of one
// chat, read into a ChatOutput that the runtime turns into node-llama-cpp
// function calling or a JSON-schema grammar. Apart from openai.ts because
// these fields have rules of their own (which combinations make sense, which
// schema constrains what) and apart from llama-runtime.ts so that the
// runtime only ever sees a decided plan, never the wire shapes.
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { LlmgwError } from '../../errors/index.js';

/** A JSON Schema as the client sent it; node-llama-cpp decides which keywords it can turn into a grammar. */
export type JsonSchema = Record<string, unknown>;

const FunctionName = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,64}$/, 'a function name is 1 to 64 letters, digits, underscores or dashes');

export const ToolSchema = z.object({
  type: z.literal('function'),
  function: z.object({
    name: FunctionName,
    description: z.string().nullish(),
    parameters: z.record(z.string(), z.unknown()).nullish(),
    strict: z.boolean().nullish(),
  }),
});

export const ToolChoiceSchema = z.union([
  z.enum(['auto', 'none', 'required']),
  z.object({ type: z.literal('function'), function: z.object({ name: z.string() }) }),
]);

export const ResponseFormatSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('text') }),
  z.object({ type: z.literal('json_object') }),
  z.object({
    type: z.literal('json_schema'),
    json_schema: z.object({
      name: z.string(),
      description: z.string().nullish(),
      schema: z.record(z.string(), z.unknown()).nullish(),
      strict: z.boolean().nullish(),
    }),
  }),
]);

export const ToolCallSchema = z.object({
  id: z.string(),
  type: z.literal('function'),
  function: z.object({ name: z.string(), arguments: z.string() }),
});

export interface ToolSpec {
  name: string;
  /** Absent means the template documents the function by its name alone. */
  description: string | undefined;
  /** The arguments' schema; a function without one takes an empty object. */
  parameters: JsonSchema;
  /** The request field the schema came from, for messages about it. */
  param: string;
}

/**
 * How one chat's answer is produced:
 * - `text`: free text, as before tools existed;
 * - `json`: text constrained by a grammar to JSON, to `schema` when there is one;
 * - `tools`: the model may answer or call any of `tools` in its template's own
 *   syntax (node-llama-cpp constrains the arguments once it starts a call);
 * - `forcedTool`: the model must call one of `tools`; a grammar writes the
 *   call, so it parses and matches the schema whatever the weights.
 * `param` names the request field a schema came from, for a schema that
 * cannot become a grammar.
 */
export type ChatOutput =
  | { kind: 'text' }
  | { kind: 'json'; schema: JsonSchema | undefined; param: string }
  | { kind: 'tools'; tools: ToolSpec[]; parallel: boolean }
  | { kind: 'forcedTool'; tools: ToolSpec[] };

/** One call the model made; `arguments` is JSON text, as OpenAI sends it. */
export interface ToolCall {
  name: string;
  arguments: string;
}

export interface ToolRequest {
  tools?: z.infer<typeof ToolSchema>[] | null | undefined;
  tool_choice?: z.infer<typeof ToolChoiceSchema> | null | undefined;
  parallel_tool_calls?: boolean | null | undefined;
  response_format?: z.infer<typeof ResponseFormatSchema> | null | undefined;
}

function refused(param: string, message: string): LlmgwError {
  return new LlmgwError('LLMGW_BAD_REQUEST', message, { context: { param } });
}

const EMPTY_PARAMETERS: JsonSchema = { type: 'object', properties: {} };

/** Reads the request's tool and format fields into one plan; contradictions are 400s naming the field. */
export function chatOutput(request: ToolRequest): ChatOutput {
  const tools: ToolSpec[] = (request.tools ?? []).map((tool, i) => ({
    name: tool.function.name,
    description: tool.function.description ?? undefined,
    parameters: tool.function.parameters ?? EMPTY_PARAMETERS,
    param: `tools[${i}].function.parameters`,
  }));
  const names = new Set<string>();
  for (const [i, tool] of tools.entries()) {
    if (names.has(tool.name))
      throw refused(`tools[${i}].function.name`, `two tools are named "${tool.name}"; give each function its own name`);
    names.add(tool.name);
  }
  const choice = request.tool_choice ?? (tools.length > 0 ? 'auto' : 'none');
  const format = request.response_format ?? { type: 'text' as const };
  const calls = choice !== 'none' && tools.length > 0;
  if (calls && format.type !== 'text') {
    throw refused(
      'response_format',
      `response_format ${format.type} and tools cannot both shape one answer; send tool_choice "none" or leave response_format out`,
    );
  }
  if (typeof choice === 'object') {
    const named = tools.find((t) => t.name === choice.function.name);
    if (!named) {
      const known =
        tools.length === 0 ? 'no tools were sent' : `the tools are ${tools.map((t) => `"${t.name}"`).join(', ')}`;
      throw refused('tool_choice', `tool_choice names "${choice.function.name}" but ${known}`);
    }
    return { kind: 'forcedTool', tools: [named] };
  }
  if (choice === 'required') {
    if (tools.length === 0) throw refused('tool_choice', 'tool_choice "required" needs at least one tool in tools');
    return { kind: 'forcedTool', tools };
  }
  if (calls) return { kind: 'tools', tools, parallel: request.parallel_tool_calls ?? true };
  if (format.type === 'json_object') return { kind: 'json', schema: undefined, param: 'response_format' };
  if (format.type === 'json_schema') {
    // OpenAI lets a json_schema format omit its schema; then any JSON object is the answer.
    const param = 'response_format.json_schema.schema';
    return { kind: 'json', schema: format.json_schema.schema ?? undefined, param };
  }
  return { kind: 'text' };
}

/**
 * The schema a forced call is written under. With one tool the grammar is
 * its arguments alone, so they can stream as they are written; with several
 * it is a choice of `{"name": ..., "arguments": ...}` objects, one per tool,
 * so the arguments always match the schema of the function named.
 */
export function forcedCallSchema(tools: readonly ToolSpec[]): JsonSchema {
  if (tools.length === 1) return tools[0]!.parameters;
  // anyOf, not oneOf: the names differ, so a call meets exactly one branch and needs no check for it.
  return {
    anyOf: tools.map((tool) => ({
      type: 'object',
      properties: { name: { const: tool.name }, arguments: tool.parameters },
      required: ['name', 'arguments'],
      additionalProperties: false,
    })),
  };
}

/** Reads what a forced call's grammar wrote back into a call; text cut short by max_tokens is passed on as it is. */
export function forcedCall(tools: readonly ToolSpec[], text: string): ToolCall {
  if (tools.length === 1) return { name: tools[0]!.name, arguments: text };
  try {
    const parsed = JSON.parse(text) as { name: string; arguments: unknown };
    return { name: parsed.name, arguments: JSON.stringify(parsed.arguments) };
  } catch {
    // Only a reply stopped by max_tokens gets here; which function it meant is unknowable, so the first stands in.
    return { name: tools[0]!.name, arguments: text };
  }
}

/** An id in OpenAI's style; clients echo it back in the tool message that answers the call. */
export function toolCallId(): string {
  return `call_${randomBytes(12).toString('base64url')}`;
}
