// A Chat Completions answer turned into an Anthropic message: its first
// choice's text as a text block, its tool calls as tool_use blocks, its
// finish reason as a stop_reason and its usage as input/output tokens. Pure,
// shared by the whole answer and the stream's end (stream.ts). messageJson
// writes a whole answer with each tool input as the engine's own text (a
// side table keyed by the parsed input remembers it; nothing else is kept).
import type { AnthropicCall } from './request.js';

export type StopReason = 'end_turn' | 'max_tokens' | 'stop_sequence' | 'tool_use' | 'refusal';

export interface AnthropicUsage {
  input_tokens: number;
  output_tokens: number;
}

export type ContentBlock =
  { type: 'text'; text: string } | { type: 'tool_use'; id: string; name: string; input: unknown };

export interface AnthropicMessage {
  id: string;
  type: 'message';
  role: 'assistant';
  model: string;
  content: ContentBlock[];
  stop_reason: StopReason | null;
  stop_sequence: string | null;
  usage: AnthropicUsage;
}

/**
 * Anthropic's stop reason for a chat finish reason. `stopMatched` is what
 * vLLM reports in a choice's `stop_reason` (the stop string that ended it);
 * an engine that does not say which stop matched gets `end_turn`.
 */
export function stopReasonOf(
  finish: unknown,
  stopMatched: unknown,
  call: AnthropicCall,
): { reason: StopReason; sequence: string | null } {
  if (finish === 'length') return { reason: 'max_tokens', sequence: null };
  if (finish === 'tool_calls' || finish === 'function_call') return { reason: 'tool_use', sequence: null };
  if (finish === 'content_filter') return { reason: 'refusal', sequence: null };
  if (typeof stopMatched === 'string' && call.stopSequences.includes(stopMatched))
    return { reason: 'stop_sequence', sequence: stopMatched };
  return { reason: 'end_turn', sequence: null };
}

/**
 * The other way, for an answer from a remote that speaks Anthropic: chat's
 * finish reason for a stop_reason (stop_sequence is `stop`, the sequence
 * itself going in the choice's stop_reason as vLLM reports it; pause_turn,
 * a server tool's pause, ends the turn as `stop`). Null stays null.
 */
export function finishReasonOf(stop: unknown): string | null {
  if (stop === null || stop === undefined) return null;
  if (stop === 'max_tokens' || stop === 'model_context_window_exceeded') return 'length';
  if (stop === 'tool_use') return 'tool_calls';
  if (stop === 'refusal') return 'content_filter';
  return 'stop';
}

/** Each tool input toolInput parsed, to the engine's text it came from: what messageJson writes in its place. */
const inputText = new WeakMap<object, string>();

/** A tool call's arguments as the object Anthropic's tool_use.input is; text that is not a JSON object is kept under `arguments`, not lost. */
export function toolInput(args: unknown): unknown {
  if (typeof args !== 'string' || args.trim() === '') return {};
  try {
    const parsed = JSON.parse(args) as unknown;
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return { arguments: args };
    inputText.set(parsed, args);
    return parsed;
  } catch {
    return { arguments: args };
  }
}

/**
 * A message as the JSON text of a whole answer, each tool_use input written
 * as the engine's own arguments text rather than the object read from it.
 * Writing the object back is not always the same value: a number JavaScript
 * read as Infinity (`1e400`, which an engine's grammar may allow) becomes
 * null, which breaks the schema the arguments were written to, and digits
 * past a double's are rounded. The client's parser reads the engine's text
 * as it would read Anthropic's, and a stream passes the same text on as it
 * is (input_json_delta), so a whole answer and a streamed one agree. The
 * text parsed as a JSON object, so the body stays valid JSON.
 */
export function messageJson(message: AnthropicMessage): string {
  return objectJson(message, (key) =>
    key === 'content' ? `[${message.content.map(blockJson).join(',')}]` : undefined,
  );
}

function blockJson(block: ContentBlock): string {
  const input = block.type === 'tool_use' ? block.input : undefined;
  const text = typeof input === 'object' && input !== null ? inputText.get(input) : undefined;
  return text === undefined ? JSON.stringify(block) : objectJson(block, (key) => (key === 'input' ? text : undefined));
}

/** An object's JSON, keys in its order, as JSON.stringify writes it but for the values `written` gives the text of (undefined: stringified). */
function objectJson(value: object, written: (key: string) => string | undefined): string {
  const members = Object.entries(value)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${JSON.stringify(k)}:${written(k) ?? JSON.stringify(v)}`);
  return `{${members.join(',')}}`;
}

/** A message id in Anthropic's form, from the engine's completion id (or `fallback` when it has none). */
export function messageId(chatId: unknown, fallback: string): string {
  const id = typeof chatId === 'string' && chatId !== '' ? chatId : fallback;
  return `msg_${id.replace(/^chatcmpl-/, '')}`;
}

interface ChatCompletion {
  id?: unknown;
  choices?: Array<{
    message?: {
      content?: unknown;
      tool_calls?: Array<{ id?: unknown; function?: { name?: unknown; arguments?: unknown } }>;
    };
    finish_reason?: unknown;
    stop_reason?: unknown;
  }>;
  usage?: { prompt_tokens?: unknown; completion_tokens?: unknown } | null;
}

/** The whole answer. `fallbackId` names it when the engine gave no id (the request id). */
export function toMessage(completion: ChatCompletion, call: AnthropicCall, fallbackId: string): AnthropicMessage {
  const choice = completion.choices?.[0];
  const content: ContentBlock[] = [];
  const text = choice?.message?.content;
  if (typeof text === 'string' && text !== '') content.push({ type: 'text', text });
  for (const [i, tc] of (choice?.message?.tool_calls ?? []).entries()) {
    content.push({
      type: 'tool_use',
      id: typeof tc.id === 'string' ? tc.id : `toolu_${fallbackId}_${i}`,
      name: typeof tc.function?.name === 'string' ? tc.function.name : '',
      input: toolInput(tc.function?.arguments),
    });
  }
  const stop = stopReasonOf(choice?.finish_reason, choice?.stop_reason, call);
  return {
    id: messageId(completion.id, fallbackId),
    type: 'message',
    role: 'assistant',
    model: call.model,
    content,
    stop_reason: stop.reason,
    stop_sequence: stop.sequence,
    usage: usageOf(completion.usage),
  };
}

/**
 * Anthropic usage as chat's, for an answer from a remote that speaks it:
 * the prompt is every input token, the cache's reads and writes included
 * (Anthropic counts those apart); read from the cache is chat's cached_tokens.
 */
export function chatUsageOf(usage: unknown): Record<string, unknown> {
  const u = (typeof usage === 'object' && usage !== null ? usage : {}) as Record<string, unknown>;
  const n = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : 0);
  const cached = n(u.cache_read_input_tokens);
  const prompt = n(u.input_tokens) + cached + n(u.cache_creation_input_tokens);
  const completion = n(u.output_tokens);
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    ...(cached > 0 ? { prompt_tokens_details: { cached_tokens: cached } } : {}),
  };
}

export function usageOf(
  usage: { prompt_tokens?: unknown; completion_tokens?: unknown } | null | undefined,
): AnthropicUsage {
  return {
    input_tokens: typeof usage?.prompt_tokens === 'number' ? usage.prompt_tokens : 0,
    output_tokens: typeof usage?.completion_tokens === 'number' ? usage.completion_tokens : 0,
  };
}
