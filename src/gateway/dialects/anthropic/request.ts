// An Anthropic Messages request turned into the Chat Completions request
// every engine serves. Pure: a body in, a chat body out (or a 400 naming the
// field), so each rule is a row in a table test. The router then treats the
// result as any chat request (its limits, its model, its retries); what the
// answer must be translated back with is returned beside it.
//
// Mapping: `system` (a string or text blocks) becomes the first, system,
// message; text and image blocks become content parts (an image's base64
// source a data: URL, a url source the URL); an assistant's tool_use blocks
// become its tool_calls; a user's tool_result blocks become role:tool
// messages, ahead of whatever else that user turn says (Chat Completions
// wants them right after the assistant's call). thinking blocks in history
// are dropped: no engine behind llmgw takes them back.
import type { LlmgwError } from '../../../errors/index.js';
import type { ParamRenames } from '../../core/param-names.js';
import { bad, isObject, type Json } from '../../core/translation-refusal.js';
import { chatToolChoice, chatTools } from './tools.js';

/** What the answer is translated back with. */
export interface AnthropicCall {
  /** The model as the client named it: the answer says the same. */
  readonly model: string;
  /** The client's stop_sequences, to tell `stop_sequence` from `end_turn`; empty = none. */
  readonly stopSequences: readonly string[];
  readonly stream: boolean;
}

export interface TranslatedRequest {
  /** The Chat Completions body, for the router's chat path. */
  readonly chat: Record<string, unknown>;
  readonly call: AnthropicCall;
}

/** Fields llmgw reads; the rest are refused by name, so a client learns what had no effect. */
const KNOWN = new Set([
  'model',
  'max_tokens',
  'messages',
  'system',
  'stop_sequences',
  'stream',
  'temperature',
  'top_p',
  'top_k',
  'tools',
  'tool_choice',
  'metadata',
  'thinking',
  'service_tier',
]);

/**
 * Parses an Anthropic Messages body (already JSON) into a chat body; throws
 * LLMGW_BAD_REQUEST naming the field. `forCount`: a count_tokens body,
 * which has no max_tokens (and the chat body then none either).
 */
/** Chat's field names as the Messages API names them, for an engine's 400 about a translated request (see param-names.ts). */
export const MESSAGES_PARAMS: ParamRenames = [
  [/tools\[(\d+)\]\.function\.parameters/, 'tools[$1].input_schema'],
  [/tools\[(\d+)\]\.function\.name/, 'tools[$1].name'],
  [/max_completion_tokens/, 'max_tokens'],
  [/stop(?!_)/, 'stop_sequences'],
];

export function toChatRequest(body: unknown, forCount = false): TranslatedRequest {
  if (!isObject(body)) throw bad('body', 'the request body must be a JSON object');
  for (const key of Object.keys(body)) {
    if (!KNOWN.has(key))
      throw bad(key, `${key}: not supported by llmgw's Messages API; remove it (see the README's list of what is)`);
  }
  const model = body.model;
  if (typeof model !== 'string' || model === '') throw bad('model', 'model: is required, the model name as a string');
  const maxTokens = body.max_tokens;
  if (forCount && maxTokens !== undefined)
    throw bad('max_tokens', 'max_tokens: count_tokens counts the prompt only; remove it');
  if (!forCount && (maxTokens === undefined || maxTokens === null))
    throw bad('max_tokens', 'max_tokens: is required by the Messages API; say how many tokens the answer may have');
  if (!forCount && (typeof maxTokens !== 'number' || !Number.isInteger(maxTokens) || maxTokens < 1))
    throw bad('max_tokens', 'max_tokens: want a whole number of at least 1');
  const stream = body.stream ?? false;
  if (typeof stream !== 'boolean') throw bad('stream', 'stream: want true or false');

  const messages: Json[] = [];
  const system = systemText(body.system);
  if (system !== null) messages.push({ role: 'system', content: system });
  if (!Array.isArray(body.messages) || body.messages.length === 0) {
    throw bad(
      'messages',
      'messages: is required, a non-empty list of {"role": "user" | "assistant", "content"} objects',
    );
  }
  body.messages.forEach((m, i) => messages.push(...chatMessages(m, `messages[${i}]`)));

  const chat: Json = forCount ? { model, messages } : { model, messages, max_tokens: maxTokens, stream };
  for (const field of ['temperature', 'top_p', 'top_k'] as const) {
    const v = body[field];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'number' || !Number.isFinite(v)) throw bad(field, `${field}: want a number`);
    chat[field] = v;
  }
  const stops = stopSequences(body.stop_sequences);
  if (stops.length) chat.stop = stops;
  if (body.tools !== undefined && body.tools !== null) chat.tools = chatTools(body.tools);
  if (body.tool_choice !== undefined && body.tool_choice !== null)
    Object.assign(chat, chatToolChoice(body.tool_choice));
  return { chat, call: { model, stopSequences: stops, stream } };
}

function systemText(system: unknown): string | null {
  if (system === undefined || system === null) return null;
  if (typeof system === 'string') return system;
  if (Array.isArray(system)) {
    return system
      .map((b, i) => {
        if (!isObject(b) || b.type !== 'text' || typeof b.text !== 'string')
          throw bad('system', `system[${i}]: want a text block {"type": "text", "text": "…"}`);
        return b.text;
      })
      .join('\n');
  }
  throw bad('system', 'system: want a string or a list of text blocks');
}

function stopSequences(v: unknown): string[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || v.some((s) => typeof s !== 'string'))
    throw bad('stop_sequences', 'stop_sequences: want a list of strings');
  return (v as string[]).filter((s) => s !== '');
}

/** One Anthropic message as one or more chat messages (a user turn with tool results is several). */
function chatMessages(m: unknown, path: string): Json[] {
  if (!isObject(m)) throw bad('messages', `${path}: want an object with "role" and "content"`);
  const role = m.role;
  if (role !== 'user' && role !== 'assistant')
    throw bad('messages', `${path}.role: want "user" or "assistant" (a system prompt goes in the top-level "system")`);
  const content = m.content;
  if (typeof content === 'string') return [{ role, content }];
  if (!Array.isArray(content)) throw bad('messages', `${path}.content: want a string or a list of content blocks`);
  return role === 'user' ? userMessages(content, path) : [assistantMessage(content, path)];
}

function userMessages(blocks: unknown[], path: string): Json[] {
  const toolMessages: Json[] = [];
  const parts: Json[] = [];
  blocks.forEach((b, i) => {
    const at = `${path}.content[${i}]`;
    if (!isObject(b)) throw bad('messages', `${at}: want a content block object`);
    switch (b.type) {
      case 'text':
        parts.push({ type: 'text', text: blockText(b, at) });
        return;
      case 'image':
        parts.push(imagePart(b, at));
        return;
      case 'tool_result':
        toolMessages.push(toolResult(b, at));
        return;
      default:
        throw unsupportedBlock(b.type, at, 'text, image and tool_result');
    }
  });
  const out = toolMessages;
  if (parts.length)
    out.push({
      role: 'user',
      content: parts.every((p) => p.type === 'text') && parts.length === 1 ? parts[0]!.text : parts,
    });
  return out;
}

function assistantMessage(blocks: unknown[], path: string): Json {
  let text = '';
  const calls: Json[] = [];
  blocks.forEach((b, i) => {
    const at = `${path}.content[${i}]`;
    if (!isObject(b)) throw bad('messages', `${at}: want a content block object`);
    switch (b.type) {
      case 'text':
        text += blockText(b, at);
        return;
      case 'tool_use': {
        if (typeof b.id !== 'string' || typeof b.name !== 'string')
          throw bad('messages', `${at}: a tool_use block wants a string "id" and "name"`);
        calls.push({
          id: b.id,
          type: 'function',
          function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) },
        });
        return;
      }
      case 'thinking':
      case 'redacted_thinking':
        return;
      default:
        throw unsupportedBlock(b.type, at, 'text, tool_use and thinking');
    }
  });
  const message: Json = { role: 'assistant', content: text === '' && calls.length ? null : text };
  if (calls.length) message.tool_calls = calls;
  return message;
}

function unsupportedBlock(type: unknown, at: string, supported: string): LlmgwError {
  return bad(
    'messages',
    `${at}: a ${JSON.stringify(type)} block is not supported here by llmgw; this role's supported blocks are ${supported}`,
  );
}

function blockText(b: Json, at: string): string {
  if (typeof b.text !== 'string') throw bad('messages', `${at}.text: want a string`);
  return b.text;
}

function imagePart(b: Json, at: string): Json {
  const source = b.source;
  if (
    isObject(source) &&
    source.type === 'base64' &&
    typeof source.media_type === 'string' &&
    typeof source.data === 'string'
  ) {
    return { type: 'image_url', image_url: { url: `data:${source.media_type};base64,${source.data}` } };
  }
  if (isObject(source) && source.type === 'url' && typeof source.url === 'string')
    return { type: 'image_url', image_url: { url: source.url } };
  throw bad('messages', `${at}.source: want {"type": "base64", "media_type", "data"} or {"type": "url", "url"}`);
}

function toolResult(b: Json, at: string): Json {
  if (typeof b.tool_use_id !== 'string')
    throw bad('messages', `${at}.tool_use_id: want the id of the tool_use block this answers`);
  let text: string;
  const c = b.content;
  if (c === undefined || c === null) text = '';
  else if (typeof c === 'string') text = c;
  else if (Array.isArray(c)) {
    // A role:tool message carries text only: an image in a tool result has nowhere to go.
    text = c
      .map((part, k) => {
        if (isObject(part) && part.type === 'text' && typeof part.text === 'string') return part.text;
        throw bad('messages', `${at}.content[${k}]: only text blocks are supported in a tool_result by llmgw`);
      })
      .join('\n');
  } else throw bad('messages', `${at}.content: want a string or a list of text blocks`);
  // The engine has no is_error flag: the model reads it in the text.
  if (b.is_error === true) text = `Error: ${text}`;
  return { role: 'tool', tool_call_id: b.tool_use_id, content: text };
}
