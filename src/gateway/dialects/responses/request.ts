// An OpenAI Responses request turned into the Chat Completions request every
// engine serves, or, for an engine that serves the Responses API itself,
// into a self-contained Responses request. Pure: a body in, a body out (or a
// 400 naming the field), so each rule is a row in a table test. Parsing and
// translating are two steps because the router must read
// previous_response_id (and fetch that conversation from the response store)
// between them.
//
// This file holds the request's own fields: which are refused by name, how
// the conversation is assembled (previous items, then the input, item
// references resolved), and what the answer echoes. Input items become chat
// messages in input-items.ts; tools, tool_choice and text.format become
// chat's in tools.ts.
import { z } from 'zod';
import { describeIssues } from '../../../validation/index.js';
import type { ParamRenames } from '../../core/param-names.js';
import { chatMessages } from './input-items.js';
import { bad, isObject, type Json } from '../../core/translation-refusal.js';
import { chatToolChoice, chatTools, responseFormat } from './tools.js';

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
/** Chat's field names as this API names them, for an engine's 400 about a translated request (see param-names.ts). */
export const RESPONSES_PARAMS: ParamRenames = [
  [/response_format\.json_schema\.schema/, 'text.format.schema'],
  [/response_format\.json_schema/, 'text.format'],
  [/response_format/, 'text.format'],
  [/tools\[(\d+)\]\.function\.parameters/, 'tools[$1].parameters'],
  [/tools\[(\d+)\]\.function\.name/, 'tools[$1].name'],
  [/max_completion_tokens|max_tokens/, 'max_output_tokens'],
  [/messages(\[\d+\])?/, 'input'],
];

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
