// An OpenAI Responses request turned into the Chat Completions request every
// engine serves, or, for an engine that serves the Responses API itself,
// into a self-contained Responses request. Pure: a body in, a body out (or a
// 400 naming the field), so each rule is a row in a table test. Parsing and
// translating are two steps because the router must read
// previous_response_id (and fetch that conversation from the response store)
// between them.
//
// Mapping to chat: `instructions` becomes the first, system, message; input
// message items become messages (developer as system: few chat templates
// know a developer role), input_text/input_image parts become text and
// image_url parts; function_call items become the assistant's tool_calls
// (merged into the assistant message they follow, as chat wants one
// assistant turn); function_call_output items become role:tool messages.
// reasoning items are dropped from the history: no engine behind llmgw takes
// reasoning back. Only function tools are served; OpenAI's built-in tools run
// on OpenAI's servers and are refused by name.
import { z } from 'zod';
import { LlmgwError } from '../../errors/index.js';
import { describeIssues } from '../../validation/index.js';

type Json = Record<string, unknown>;

/** A validated Responses request, before the previous conversation is known. */
export interface ResponsesRequest {
  /** The body as the client sent it (validated; unknown fields kept for the native path). */
  readonly body: Readonly<Json>;
  /** The model as the client named it: the answer says the same. */
  readonly model: string;
  readonly stream: boolean;
  /** Whether the client wants the response kept (`store`, default true). */
  readonly store: boolean;
  /** The response this one continues; null = a new conversation. */
  readonly previousResponseId: string | null;
  /** This request's input as a list of items (a string input is one user message item). */
  readonly input: readonly Json[];
}

/** What the answer is translated back with, and echoed into it. */
export interface ResponsesCall {
  readonly model: string;
  readonly stream: boolean;
  readonly store: boolean;
  readonly previousResponseId: string | null;
  /** The conversation so far: the previous response's items, then this request's input (item references resolved). */
  readonly items: readonly Json[];
  /** The request's fields a Response echoes (instructions, tools, tool_choice, text, …), with OpenAI's defaults for those absent. */
  readonly echo: Readonly<Json>;
}

export interface TranslatedResponsesRequest {
  /** The Chat Completions body, for the router's chat path. */
  readonly chat: Json;
  readonly call: ResponsesCall;
}

function bad(param: string, message: string): LlmgwError {
  return new LlmgwError('LLMGW_BAD_REQUEST', message, { context: { param } });
}

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const positiveInt = z.number({ error: 'want a whole number' }).int('want a whole number').min(1, 'want at least 1');

// Loose: clients send many optional fields that change nothing an engine
// does (prompt_cache_key, safety_identifier, service_tier, stream_options,
// text.verbosity); refusing them would break ordinary clients. Fields that
// would change the answer and cannot be honoured are refused below by name.
const RequestSchema = z.looseObject({
  model: z.string({ error: 'want the model name as a string' }).min(1, 'want a model name'),
  input: z.union([z.string(), z.array(z.unknown())], { error: 'want a string or a list of input items' }).optional(),
  instructions: z.string({ error: 'want a string' }).nullish(),
  tools: z.array(z.unknown(), { error: 'want a list of tools' }).nullish(),
  tool_choice: z.unknown().optional(),
  text: z
    .looseObject({ format: z.unknown().optional() }, { error: 'want an object such as {"format": {"type": "text"}}' })
    .nullish(),
  max_output_tokens: positiveInt.nullish(),
  temperature: z.number({ error: 'want a number' }).min(0, 'want 0 to 2').max(2, 'want 0 to 2').nullish(),
  top_p: z.number({ error: 'want a number' }).min(0, 'want 0 to 1').max(1, 'want 0 to 1').nullish(),
  top_logprobs: z
    .number({ error: 'want a whole number' })
    .int('want a whole number')
    .min(0, 'want 0 to 20')
    .max(20, 'want 0 to 20')
    .nullish(),
  parallel_tool_calls: z.boolean({ error: 'want true or false' }).nullish(),
  reasoning: z
    .looseObject(
      { effort: z.string({ error: 'want a string such as "low"' }).nullish() },
      { error: 'want an object such as {"effort": "low"}' },
    )
    .nullish(),
  user: z.string({ error: 'want a string' }).optional(),
  metadata: z
    .record(z.string(), z.string({ error: 'want string values' }), { error: 'want an object of string values' })
    .nullish(),
  stream: z.boolean({ error: 'want true or false' }).nullish(),
  store: z.boolean({ error: 'want true or false' }).nullish(),
  previous_response_id: z
    .string({ error: 'want a response id such as "resp_…"' })
    .min(1, 'want a response id')
    .nullish(),
  background: z.boolean({ error: 'want true or false' }).nullish(),
  truncation: z.enum(['auto', 'disabled'], { error: 'want "disabled"' }).nullish(),
  include: z.array(z.string({ error: 'want strings' }), { error: 'want a list of strings' }).nullish(),
});

/**
 * `include` values llmgw honours: logprobs (asked of the engine),
 * encrypted reasoning (llmgw has none to give, and clients ask for it by
 * default with store:false) and input image URLs (kept as sent anyway).
 * The rest name outputs of OpenAI's built-in tools.
 */
const INCLUDABLE = new Set([
  'message.output_text.logprobs',
  'reasoning.encrypted_content',
  'message.input_image.image_url',
]);

/**
 * Parses a Responses body (already JSON); throws LLMGW_BAD_REQUEST naming
 * the field. Every input item is checked here, so a bad one is refused
 * before the previous conversation is fetched.
 */
export function parseRequest(body: unknown): ResponsesRequest {
  if (!isObject(body)) throw bad('body', 'the request body must be a JSON object');
  const parsed = RequestSchema.safeParse(body);
  if (!parsed.success) {
    const first = parsed.error.issues[0];
    const param = typeof first?.path[0] === 'string' ? first.path[0] : 'body';
    throw bad(param, describeIssues(RequestSchema, parsed.error).join('; '));
  }
  const b = parsed.data;
  if (b.background === true)
    throw bad(
      'background',
      'background: background mode is not supported by llmgw; remove it and wait for the answer, or stream it',
    );
  if (b.conversation !== undefined && b.conversation !== null) {
    throw bad(
      'conversation',
      'conversation: the Conversations API is not supported by llmgw; continue a conversation with previous_response_id instead',
    );
  }
  if (b.prompt !== undefined && b.prompt !== null)
    throw bad(
      'prompt',
      'prompt: stored prompt templates are not supported by llmgw; send the text as instructions and input',
    );
  if (b.truncation === 'auto') {
    throw bad(
      'truncation',
      'truncation: "auto" is not supported by llmgw (a conversation longer than the context is refused, not cut); remove it or set "disabled"',
    );
  }
  for (const value of b.include ?? []) {
    if (!INCLUDABLE.has(value))
      throw bad(
        'include',
        `include: ${JSON.stringify(value)} is not supported by llmgw (it names output of OpenAI's built-in tools); supported: ${[...INCLUDABLE].join(', ')}`,
      );
  }
  if (b.tools) chatTools(b.tools);
  if (b.tool_choice !== undefined && b.tool_choice !== null) chatToolChoice(b.tool_choice);
  if (b.text?.format !== undefined && b.text.format !== null) responseFormat(b.text.format);

  const input: Json[] =
    typeof b.input === 'string'
      ? [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: b.input }] }]
      : (b.input ?? []).map((item, i) => {
          if (!isObject(item))
            throw bad('input', `input[${i}]: want an item object such as {"role": "user", "content": "…"}`);
          return item;
        });
  const previousResponseId = b.previous_response_id ?? null;
  if (input.length === 0 && previousResponseId === null)
    throw bad('input', 'input: is required, a string or a non-empty list of input items');
  // Checked now (references left for toChat, which knows the conversation they point into).
  chatMessages(input, true);
  return { body: b, model: b.model, stream: b.stream ?? false, store: b.store ?? true, previousResponseId, input };
}

/** The ids this request's item_reference items name: what to look up (ResponseStore.findItems) before translating. */
export function itemReferences(request: ResponsesRequest): string[] {
  return request.input
    .filter((item) => item.type === 'item_reference' && typeof item.id === 'string')
    .map((item) => item.id as string);
}

/**
 * The chat body for a parsed request continuing `previousItems` (the
 * StoredResponse.items of previous_response_id; empty for a new
 * conversation). An item_reference resolves to the item of that id among
 * `previousItems`, else in `referenced` (the key's kept output items, by
 * id); one found in neither is refused.
 */
export function toChat(
  request: ResponsesRequest,
  previousItems: readonly unknown[] = [],
  referenced: ReadonlyMap<string, unknown> = new Map(),
): TranslatedResponsesRequest {
  const b = request.body;
  const items = conversation(request, previousItems, referenced);
  const messages: Json[] = [];
  if (typeof b.instructions === 'string' && b.instructions !== '')
    messages.push({ role: 'system', content: b.instructions });
  for (const m of chatMessages(items, false)) {
    // Leading system text (instructions, then system or developer items) as one message: many chat templates refuse a second.
    const last = messages.at(-1);
    if (
      m.role === 'system' &&
      last?.role === 'system' &&
      messages.length === 1 &&
      typeof last.content === 'string' &&
      typeof m.content === 'string'
    ) {
      last.content = `${last.content}\n\n${m.content}`;
    } else messages.push(m);
  }
  if (!messages.some((m) => m.role !== 'system'))
    throw bad('input', 'input: the conversation has no message to answer; send at least one input item');

  const chat: Json = { model: request.model, messages, stream: request.stream };
  // The translator builds the answer's usage from the stream's last chunk.
  if (request.stream) chat.stream_options = { include_usage: true };
  if (typeof b.max_output_tokens === 'number') chat.max_tokens = b.max_output_tokens;
  for (const field of ['temperature', 'top_p', 'parallel_tool_calls', 'user'] as const) {
    if (b[field] !== undefined && b[field] !== null) chat[field] = b[field];
  }
  const tools = Array.isArray(b.tools) ? chatTools(b.tools) : [];
  if (tools.length) chat.tools = tools;
  if (b.tool_choice !== undefined && b.tool_choice !== null) chat.tool_choice = chatToolChoice(b.tool_choice);
  const text = isObject(b.text) ? b.text : undefined;
  const format = text?.format !== undefined && text.format !== null ? responseFormat(text.format) : null;
  if (format) chat.response_format = format;
  // Passed as chat's reasoning_effort: engines that reason (vLLM, llama.cpp with a thinking template) read it; the rest ignore it.
  const reasoning = isObject(b.reasoning) ? b.reasoning : undefined;
  if (typeof reasoning?.effort === 'string') chat.reasoning_effort = reasoning.effort;
  const include = Array.isArray(b.include) ? b.include : [];
  if (include.includes('message.output_text.logprobs') || (typeof b.top_logprobs === 'number' && b.top_logprobs > 0)) {
    chat.logprobs = true;
    if (typeof b.top_logprobs === 'number' && b.top_logprobs > 0) chat.top_logprobs = b.top_logprobs;
  }
  return { chat, call: callOf(request, items) };
}

/**
 * The body for an engine that serves the Responses API natively: the whole
 * conversation in `input`, no previous_response_id (the engine never saw
 * it; llmgw keeps conversations) and `store: false` (so the engine keeps
 * nothing: what llmgw keeps, it keeps per key, in its own store).
 */
export function toNative(
  request: ResponsesRequest,
  previousItems: readonly unknown[] = [],
  referenced: ReadonlyMap<string, unknown> = new Map(),
): { readonly body: Json; readonly call: ResponsesCall } {
  const items = conversation(request, previousItems, referenced);
  const body: Json = { ...request.body, input: items, store: false };
  delete body.previous_response_id;
  return { body, call: callOf(request, items) };
}

function callOf(request: ResponsesRequest, items: readonly Json[]): ResponsesCall {
  const b = request.body;
  const echo: Json = {
    instructions: typeof b.instructions === 'string' ? b.instructions : null,
    max_output_tokens: b.max_output_tokens ?? null,
    metadata: b.metadata ?? {},
    parallel_tool_calls: b.parallel_tool_calls ?? true,
    previous_response_id: request.previousResponseId,
    reasoning: {
      effort: isObject(b.reasoning) && typeof b.reasoning.effort === 'string' ? b.reasoning.effort : null,
      summary: null,
    },
    store: request.store,
    // null: the engine's own default applied.
    temperature: b.temperature ?? null,
    text: isObject(b.text) && b.text.format ? { format: b.text.format } : { format: { type: 'text' } },
    tool_choice: b.tool_choice ?? 'auto',
    tools: b.tools ?? [],
    top_p: b.top_p ?? null,
    truncation: 'disabled',
  };
  if (typeof b.user === 'string') echo.user = b.user;
  return {
    model: request.model,
    stream: request.stream,
    store: request.store,
    previousResponseId: request.previousResponseId,
    items,
    echo,
  };
}

/** The previous items then this request's input, every item_reference replaced by the item it names. */
function conversation(
  request: ResponsesRequest,
  previousItems: readonly unknown[],
  referenced: ReadonlyMap<string, unknown>,
): Json[] {
  const previous = previousItems.filter(isObject);
  const byId = new Map<string, Json>();
  for (const [id, item] of referenced) if (isObject(item)) byId.set(id, item);
  // The conversation's own items win over a lookup by id.
  for (const item of previous) if (typeof item.id === 'string') byId.set(item.id, item);
  const input = request.input.map((item, i) => {
    if (item.type !== 'item_reference') return item;
    const found = typeof item.id === 'string' ? byId.get(item.id) : undefined;
    if (!found) {
      throw bad(
        'input',
        `input[${i}]: item_reference ${JSON.stringify(item.id)} names no item this key has kept (it may have expired or been dropped); send the item itself (the AI SDK does with providerOptions.openai.store: false)`,
      );
    }
    return found;
  });
  return [...previous, ...input];
}

/** Input items as chat messages. `check`: validating only, so item references pass unresolved. */
function chatMessages(items: readonly Json[], check: boolean): Json[] {
  const out: Json[] = [];
  // The assistant message function_call items join: the one just written, if it is the assistant's.
  let assistant: Json | null = null;
  items.forEach((item, i) => {
    const at = `input[${i}]`;
    const type = item.type ?? (item.role !== undefined ? 'message' : undefined);
    switch (type) {
      case 'message': {
        const message = chatMessage(item, at);
        out.push(message);
        assistant = message.role === 'assistant' ? message : null;
        return;
      }
      case 'function_call': {
        if (typeof item.call_id !== 'string' || item.call_id === '')
          throw bad('input', `${at}.call_id: want the call's id, a string`);
        if (typeof item.name !== 'string' || item.name === '')
          throw bad('input', `${at}.name: want the function's name, a string`);
        if (typeof item.arguments !== 'string')
          throw bad('input', `${at}.arguments: want the arguments as a JSON string`);
        const call = { id: item.call_id, type: 'function', function: { name: item.name, arguments: item.arguments } };
        if (!assistant) {
          assistant = { role: 'assistant', content: null };
          out.push(assistant);
        }
        const calls = (assistant.tool_calls ??= []) as Json[];
        calls.push(call);
        return;
      }
      case 'function_call_output':
        out.push(toolMessage(item, at));
        assistant = null;
        return;
      case 'reasoning':
        // Dropped: no engine behind llmgw takes reasoning back, and leaving it out keeps the assistant turns whole.
        return;
      case 'item_reference':
        if (check) {
          if (typeof item.id !== 'string' || item.id === '')
            throw bad('input', `${at}.id: want the id of the item referred to`);
          return;
        }
        throw bad('input', `${at}: an item_reference that was not resolved`);
      default:
        throw bad(
          'input',
          `${at}: a ${JSON.stringify(type)} item is not supported by llmgw; supported items are messages, function_call, function_call_output, reasoning and item_reference`,
        );
    }
  });
  return out;
}

function chatMessage(item: Json, at: string): Json {
  const role = item.role;
  if (role !== 'user' && role !== 'system' && role !== 'developer' && role !== 'assistant') {
    throw bad('input', `${at}.role: want "user", "system", "developer" or "assistant", got ${JSON.stringify(role)}`);
  }
  const chatRole = role === 'developer' ? 'system' : role;
  const content = item.content;
  if (typeof content === 'string') return { role: chatRole, content };
  if (!Array.isArray(content)) throw bad('input', `${at}.content: want a string or a list of content parts`);
  const parts = content.map((p, k) => contentPart(p, `${at}.content[${k}]`, role));
  if (parts.every((p) => p.type === 'text')) {
    // One string: system and assistant turns are plain text in every chat template; a user's text reads the same joined.
    if (chatRole !== 'user' || parts.length === 1)
      return { role: chatRole, content: parts.map((p) => p.text).join('\n') };
  }
  return { role: chatRole, content: parts };
}

function contentPart(p: unknown, at: string, role: string): Json {
  if (!isObject(p)) throw bad('input', `${at}: want a content part object`);
  switch (p.type) {
    case 'input_text':
    case 'output_text':
      if (typeof p.text !== 'string') throw bad('input', `${at}.text: want a string`);
      return { type: 'text', text: p.text };
    case 'refusal':
      if (role !== 'assistant') break;
      if (typeof p.refusal !== 'string') throw bad('input', `${at}.refusal: want a string`);
      return { type: 'text', text: p.refusal };
    case 'input_image': {
      if (role !== 'user') throw bad('input', `${at}: an image is supported only in a user message`);
      if (typeof p.file_id === 'string' && p.file_id !== '') {
        throw bad(
          'input',
          `${at}.file_id: files are not supported by llmgw (it has no Files API); send the image as image_url, a URL or a data: URL`,
        );
      }
      if (typeof p.image_url !== 'string' || p.image_url === '')
        throw bad('input', `${at}.image_url: want the image's URL or a data: URL`);
      const image: Json = { url: p.image_url };
      // 'original' has no chat counterpart: the engine's default applies.
      if (p.detail === 'low' || p.detail === 'high' || p.detail === 'auto') image.detail = p.detail;
      return { type: 'image_url', image_url: image };
    }
    case 'input_file':
      throw bad(
        'input',
        `${at}: files are not supported by llmgw (it has no Files API); send the file's text as input_text`,
      );
    default:
      break;
  }
  const supported =
    role === 'assistant' ? 'output_text and refusal' : role === 'user' ? 'input_text and input_image' : 'input_text';
  throw bad(
    'input',
    `${at}: a ${JSON.stringify(p.type)} part is not supported here by llmgw; this role's supported parts are ${supported}`,
  );
}

function toolMessage(item: Json, at: string): Json {
  if (typeof item.call_id !== 'string' || item.call_id === '')
    throw bad('input', `${at}.call_id: want the call_id of the function_call this answers`);
  const output = item.output;
  let text: string;
  if (typeof output === 'string') text = output;
  else if (Array.isArray(output)) {
    // A role:tool message carries text only: an image or a file in a function's output has nowhere to go.
    text = output
      .map((part, k) => {
        if (isObject(part) && part.type === 'input_text' && typeof part.text === 'string') return part.text;
        throw bad(
          'input',
          `${at}.output[${k}]: only input_text parts are supported in a function_call_output by llmgw`,
        );
      })
      .join('\n');
  } else throw bad('input', `${at}.output: want a string or a list of input_text parts`);
  return { role: 'tool', tool_call_id: item.call_id, content: text };
}

function chatTools(tools: readonly unknown[]): Json[] {
  return tools.map((t, i) => {
    const at = `tools[${i}]`;
    if (!isObject(t))
      throw bad('tools', `${at}: want a tool object such as {"type": "function", "name", "parameters"}`);
    if (t.type !== 'function') {
      throw bad(
        'tools',
        `${at}.type: ${JSON.stringify(t.type)} is a tool OpenAI runs on its own servers; llmgw serves only function tools ({"type": "function", "name", "parameters"}), run by the client`,
      );
    }
    if (typeof t.name !== 'string' || t.name === '')
      throw bad('tools', `${at}.name: want the function's name, a string`);
    const fn: Json = { name: t.name };
    if (typeof t.description === 'string') fn.description = t.description;
    if (t.parameters !== undefined && t.parameters !== null) {
      if (!isObject(t.parameters)) throw bad('tools', `${at}.parameters: want a JSON Schema object`);
      fn.parameters = t.parameters;
    }
    if (typeof t.strict === 'boolean') fn.strict = t.strict;
    return { type: 'function', function: fn };
  });
}

function chatToolChoice(v: unknown): unknown {
  if (v === 'auto' || v === 'none' || v === 'required') return v;
  if (isObject(v) && v.type === 'function') {
    if (typeof v.name !== 'string' || v.name === '')
      throw bad('tool_choice', 'tool_choice.name: want the name of the function to call');
    return { type: 'function', function: { name: v.name } };
  }
  const what = isObject(v) ? `{"type": ${JSON.stringify(v.type)}}` : JSON.stringify(v);
  throw bad(
    'tool_choice',
    `tool_choice: ${what} is not supported by llmgw; want "auto", "none", "required" or {"type": "function", "name"}`,
  );
}

function responseFormat(format: unknown): Json | null {
  if (!isObject(format)) throw bad('text', 'text.format: want {"type": "text" | "json_object" | "json_schema"}');
  switch (format.type) {
    case 'text':
      return null;
    case 'json_object':
      return { type: 'json_object' };
    case 'json_schema': {
      if (typeof format.name !== 'string' || format.name === '')
        throw bad('text', "text.format.name: want the schema's name, a string");
      if (!isObject(format.schema)) throw bad('text', 'text.format.schema: want a JSON Schema object');
      const schema: Json = { name: format.name, schema: format.schema };
      if (typeof format.description === 'string') schema.description = format.description;
      if (typeof format.strict === 'boolean') schema.strict = format.strict;
      return { type: 'json_schema', json_schema: schema };
    }
    default:
      throw bad(
        'text',
        `text.format.type: want "text", "json_object" or "json_schema", got ${JSON.stringify(format.type)}`,
      );
  }
}
