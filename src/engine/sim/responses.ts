// The sim's own answer to POST /v1/responses, as vLLM (0.10 and later)
// serves OpenAI's Responses API: the request read into the facts the
// generator needs (the conversation hashed as chat hashes its messages, so
// the same conversation gets the same words either way), and the Response
// object and stream events written from what was generated. Apart from the
// server because it is a second API's shapes, and apart from the router's
// translation on purpose: the sim plays a real engine, so a router test that
// sees both paths agree compares two independent writings of the API.
//
// Like vLLM with its response store off, the sim keeps nothing: `store` is
// answered false, and a `previous_response_id` is refused with 404, since
// no response is ever found. Only function tools are served.
import { LlmgwError } from '../../errors/index.js';
import { fnvStart, fnvUpdate, fnvUpdateInt, promptTokensOfText } from './generate.js';
import type { GenerationRequest } from './requests.js';

/** A Responses request: what generation needs, and what the Response echoes back. */
export interface ResponsesRequest {
  readonly generation: GenerationRequest;
  /** The request's settings as the Response object repeats them (instructions, tools, tool_choice, ...). */
  readonly echo: Readonly<Record<string, unknown>>;
  /** max_output_tokens as asked; null = not given (the sim's default budget then stands for a natural end). */
  readonly maxOutputTokens: number | null;
}

/** Tool types of OpenAI's built-in tools: the sim (as vLLM without a tool server) runs none of them. */
const FUNCTION_TOOL = 'function';

function bad(param: string, message: string): LlmgwError {
  return new LlmgwError('LLMGW_BAD_REQUEST', message, { context: { param } });
}

/** The text of a content value: a string, or a list of parts of which those with text count. */
function partsText(content: unknown, param: string): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) throw bad(param, `${param}: want a string or a list of content parts`);
  let text = '';
  for (const part of content) {
    if (typeof part !== 'object' || part === null)
      throw bad(param, `${param}: want content parts such as {"type": "input_text", "text": "..."}`);
    const t = (part as { text?: unknown }).text;
    if (typeof t === 'string') text += t;
  }
  return text;
}

/**
 * Reads a Responses body. The conversation is `instructions` (a system
 * message), then `input`: a string (one user message) or items: messages,
 * function calls (hashed as assistant turns of their arguments), function
 * call outputs (tool turns of their output); reasoning items carry nothing.
 */
export function parseResponsesRequest(body: unknown): ResponsesRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw bad('body', 'the request body must be a JSON object');
  const o = body as Record<string, unknown>;
  const model = o.model;
  if (model !== undefined && model !== null && typeof model !== 'string')
    throw bad('model', 'model: want a string naming a served model');
  if (o.background === true)
    throw bad('background', 'background: the sim engine keeps no responses, so it cannot run one in the background');
  const previous = o.previous_response_id;
  if (typeof previous === 'string' && previous !== '') {
    throw new LlmgwError('LLMGW_NOT_FOUND', `Response with id '${previous}' not found.`, {
      context: { param: 'previous_response_id' },
      status: 404,
    });
  }
  if (o.stream !== undefined && o.stream !== null && typeof o.stream !== 'boolean')
    throw bad('stream', 'stream: want true or false');
  const maxOut = o.max_output_tokens;
  if (
    maxOut !== undefined &&
    maxOut !== null &&
    (typeof maxOut !== 'number' || !Number.isInteger(maxOut) || maxOut < 1)
  ) {
    throw bad('max_output_tokens', `max_output_tokens: want an integer of at least 1, got ${JSON.stringify(maxOut)}`);
  }
  const seedValue = o.seed;
  if (seedValue !== undefined && seedValue !== null && (typeof seedValue !== 'number' || !Number.isInteger(seedValue)))
    throw bad('seed', 'seed: want an integer');

  let hash = fnvStart();
  let content = '';
  const turn = (role: string, text: string) => {
    hash = fnvUpdateInt(fnvUpdate(fnvUpdateInt(fnvUpdate(hash, role), 0), text), 1);
    content += text;
  };
  if (o.instructions !== undefined && o.instructions !== null) {
    if (typeof o.instructions !== 'string') throw bad('instructions', 'instructions: want a string');
    turn('system', o.instructions);
  }
  const input = o.input;
  if (typeof input === 'string') turn('user', input);
  else if (Array.isArray(input) && input.length > 0) {
    input.forEach((item: unknown, i) => {
      const param = `input[${i}]`;
      if (typeof item !== 'object' || item === null) throw bad(param, `${param}: want an input item object`);
      const it = item as Record<string, unknown>;
      const type = it.type ?? 'message';
      if (type === 'message') {
        if (typeof it.role !== 'string') throw bad(param, `${param}: a message wants a string role`);
        turn(it.role, partsText(it.content, `${param}.content`));
      } else if (type === 'function_call') {
        if (typeof it.name !== 'string' || typeof it.arguments !== 'string')
          throw bad(param, `${param}: a function_call wants a string name and arguments`);
        turn('assistant', it.arguments);
      } else if (type === 'function_call_output') {
        turn('tool', typeof it.output === 'string' ? it.output : partsText(it.output, `${param}.output`));
      } else if (type !== 'reasoning') {
        throw bad(
          param,
          `${param}: the sim engine reads message, function_call, function_call_output and reasoning items, not ${JSON.stringify(type)}`,
        );
      }
    });
  } else throw bad('input', 'input: is required, a string or a non-empty list of input items');

  const tools = o.tools ?? [];
  if (!Array.isArray(tools)) throw bad('tools', 'tools: want a list of function tools');
  const names: string[] = [];
  tools.forEach((t: unknown, i) => {
    const type = (t as { type?: unknown } | null)?.type;
    if (type !== FUNCTION_TOOL)
      throw bad(`tools[${i}]`, `tools[${i}]: the sim engine serves function tools only, not ${JSON.stringify(type)}`);
    const name = (t as { name?: unknown }).name;
    if (typeof name !== 'string') throw bad(`tools[${i}]`, `tools[${i}]: a function tool wants a string name`);
    names.push(name);
  });
  const toolCall = forcedFunction(o.tool_choice, names);

  const maxOutputTokens = typeof maxOut === 'number' ? maxOut : null;
  const generation: GenerationRequest = {
    kind: 'chat',
    model: typeof model === 'string' ? model : undefined,
    stream: o.stream === true,
    includeUsage: false,
    maxTokens: maxOutputTokens,
    n: 1,
    stops: [],
    seed: typeof seedValue === 'number' ? seedValue : null,
    prompts: [{ hash, promptTokens: promptTokensOfText(content.length), content }],
    toolCall,
  };
  const echo = {
    instructions: o.instructions ?? null,
    max_output_tokens: maxOutputTokens,
    parallel_tool_calls: o.parallel_tool_calls ?? true,
    previous_response_id: null,
    reasoning: o.reasoning ?? null,
    store: false,
    temperature: o.temperature ?? 1,
    text: o.text ?? { format: { type: 'text' } },
    tool_choice: o.tool_choice ?? 'auto',
    tools,
    top_p: o.top_p ?? 1,
    truncation: o.truncation ?? 'disabled',
    user: o.user ?? null,
    metadata: o.metadata ?? {},
  };
  return { generation, echo, maxOutputTokens };
}

/** The function a tool_choice forces ("required": the first tool; {type: "function", name}: that one); null = the sim answers in text. */
function forcedFunction(choice: unknown, names: readonly string[]): string | null {
  if (choice === undefined || choice === null || choice === 'auto' || choice === 'none') return null;
  if (choice === 'required') {
    if (names.length === 0) throw bad('tool_choice', 'tool_choice: "required" needs at least one function in tools');
    return names[0]!;
  }
  const named = (choice as { type?: unknown; name?: unknown }).name;
  if ((choice as { type?: unknown }).type !== 'function' || typeof named !== 'string') {
    throw bad('tool_choice', 'tool_choice: want "auto", "none", "required" or {"type": "function", "name": "..."}');
  }
  if (!names.includes(named)) throw bad('tool_choice', `tool_choice: the function \`${named}\` is not in tools`);
  return named;
}

/** The Response object: its echoes, the output items, the status and usage. */
export function responseObject(
  id: string,
  model: string,
  createdAtS: number,
  request: ResponsesRequest,
  status: 'in_progress' | 'completed' | 'incomplete',
  output: readonly unknown[],
  usage: { input: number; output: number } | null,
): Record<string, unknown> {
  return {
    id,
    object: 'response',
    created_at: createdAtS,
    status,
    error: null,
    incomplete_details: status === 'incomplete' ? { reason: 'max_output_tokens' } : null,
    model,
    output,
    ...request.echo,
    usage:
      usage === null
        ? null
        : {
            input_tokens: usage.input,
            input_tokens_details: { cached_tokens: 0 },
            output_tokens: usage.output,
            output_tokens_details: { reasoning_tokens: 0 },
            total_tokens: usage.input + usage.output,
          },
  };
}

/** One SSE event of a Responses stream: its type as the event name and in the data, with its sequence number. */
export function responsesEvent(type: string, sequence: number, fields: Record<string, unknown>): string {
  return `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sequence, ...fields })}\n\n`;
}
