// A Chat Completions request turned into an Anthropic Messages request, for
// a remote endpoint that speaks Anthropic (`api: anthropic`): the reverse of
// request.ts, which turns a client's Messages request into chat. Pure: the
// internal chat body in (after the router's own rewrites: the served model
// name, stream_options, a key's max_tokens cap), a Messages body out, or a
// throw naming what the Messages API cannot express (the router then tries
// another replica). Its answer comes back through remote-answer.ts.
//
// Mapping: system and developer messages become the top-level `system`;
// text and image parts become blocks (a data: URL a base64 source, any other
// URL a url source); an assistant's tool_calls become tool_use blocks; role
// tool messages become tool_result blocks of a user turn, as Anthropic wants
// them; a user turn that follows joins it. Fields with no counterpart that
// change nothing the model writes (seed, stream_options, penalties) are left
// out; those that would change the answer are refused by name.
import { bad, isObject, type Json } from '../../core/translation-refusal.js';
import { toolInput } from './response.js';
import { messagesToolChoice, messagesTools } from './tools.js';

/** The Messages API version sent in `anthropic-version`: the one whose shapes these translations write and read. */
export const ANTHROPIC_VERSION = '2023-06-01';

/** max_tokens when the chat request sets none: Anthropic requires one, chat does not. */
export const DEFAULT_MAX_TOKENS = 4096;

/** Chat fields whose meaning the Messages API cannot carry: a request using them is not sent to such a remote. */
const REFUSED: ReadonlyArray<readonly [string, (v: unknown) => boolean]> = [
  ['n', (v) => typeof v === 'number' && v > 1],
  ['logprobs', (v) => v === true],
  ['logit_bias', (v) => isObject(v) && Object.keys(v).length > 0],
  ['response_format', (v) => isObject(v) && v.type !== 'text'],
  ['audio', (v) => v !== undefined && v !== null],
];

/** The Messages body for a chat body; throws LLMGW_BAD_REQUEST naming what cannot be sent. */
export function toMessagesRequest(chat: Json): Json {
  for (const [field, refused] of REFUSED) {
    if (refused(chat[field]))
      throw bad(field, `${field}: the remote speaks Anthropic's Messages API, which has no counterpart`);
  }
  if (!Array.isArray(chat.messages)) throw bad('messages', 'messages: want a list');
  const system: string[] = [];
  const messages: Json[] = [];
  chat.messages.forEach((m, i) => {
    if (!isObject(m)) throw bad('messages', `messages[${i}]: want an object`);
    if (m.role === 'system' || m.role === 'developer') system.push(textOf(m.content, `messages[${i}]`));
    else if (m.role === 'user') addTurn(messages, 'user', userBlocks(m.content, `messages[${i}]`));
    else if (m.role === 'assistant') addTurn(messages, 'assistant', assistantBlocks(m, `messages[${i}]`));
    else if (m.role === 'tool') addTurn(messages, 'user', [toolResult(m, `messages[${i}]`)]);
    else throw bad('messages', `messages[${i}].role: ${JSON.stringify(m.role)} has no Anthropic counterpart`);
  });
  const maxTokens = [chat.max_completion_tokens, chat.max_tokens].find((v) => typeof v === 'number');
  const body: Json = { model: chat.model, max_tokens: maxTokens ?? DEFAULT_MAX_TOKENS, messages };
  if (system.length) body.system = system.join('\n\n');
  if (chat.stream === true) body.stream = true;
  for (const field of ['temperature', 'top_p', 'top_k'] as const)
    if (typeof chat[field] === 'number') body[field] = chat[field];
  const stop = typeof chat.stop === 'string' ? [chat.stop] : Array.isArray(chat.stop) ? chat.stop : [];
  if (stop.length) body.stop_sequences = stop;
  if (Array.isArray(chat.tools) && chat.tools.length) body.tools = messagesTools(chat.tools);
  const choice = messagesToolChoice(chat.tool_choice, chat.parallel_tool_calls);
  if (choice) body.tool_choice = choice;
  if (typeof chat.user === 'string' && chat.user !== '') body.metadata = { user_id: chat.user };
  return body;
}

/** Appends a turn's blocks, joining the last turn when it is the same role's (tool results then the user's text). */
function addTurn(messages: Json[], role: 'user' | 'assistant', blocks: Json[]): void {
  if (blocks.length === 0) return;
  const last = messages.at(-1);
  if (last?.role === role) (last.content as Json[]).push(...blocks);
  else messages.push({ role, content: blocks });
}

function textOf(content: unknown, at: string): string {
  if (typeof content === 'string') return content;
  if (content === null || content === undefined) return '';
  if (!Array.isArray(content)) throw bad('messages', `${at}.content: want a string or a list of parts`);
  return content
    .map((p, k) => {
      if (isObject(p) && p.type === 'text' && typeof p.text === 'string') return p.text;
      throw bad('messages', `${at}.content[${k}]: only text parts can be sent here to an Anthropic API`);
    })
    .join('\n');
}

function userBlocks(content: unknown, at: string): Json[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  if (!Array.isArray(content)) throw bad('messages', `${at}.content: want a string or a list of parts`);
  return content.map((p, k) => {
    if (isObject(p) && p.type === 'text' && typeof p.text === 'string') return { type: 'text', text: p.text };
    const url = isObject(p) && p.type === 'image_url' && isObject(p.image_url) ? p.image_url.url : undefined;
    if (typeof url === 'string') return { type: 'image', source: imageSource(url) };
    throw bad(
      'messages',
      `${at}.content[${k}]: a ${JSON.stringify(isObject(p) ? p.type : p)} part cannot be sent to an Anthropic API`,
    );
  });
}

/** A data: URL as a base64 source, any other URL as a url source. */
function imageSource(url: string): Json {
  const data = /^data:([^;,]+);base64,(.*)$/s.exec(url);
  return data ? { type: 'base64', media_type: data[1], data: data[2] } : { type: 'url', url };
}

function assistantBlocks(m: Json, at: string): Json[] {
  const blocks: Json[] = [];
  const text = textOf(m.content, at);
  if (text !== '') blocks.push({ type: 'text', text });
  const calls = Array.isArray(m.tool_calls) ? m.tool_calls : [];
  calls.forEach((c, k) => {
    const fn = isObject(c) && isObject(c.function) ? c.function : null;
    if (!fn || typeof fn.name !== 'string' || typeof c.id !== 'string')
      throw bad('messages', `${at}.tool_calls[${k}]: want {"id", "function": {"name", "arguments"}}`);
    blocks.push({ type: 'tool_use', id: c.id, name: fn.name, input: toolInput(fn.arguments) });
  });
  return blocks;
}

function toolResult(m: Json, at: string): Json {
  if (typeof m.tool_call_id !== 'string') throw bad('messages', `${at}.tool_call_id: want the id of the call`);
  return { type: 'tool_result', tool_use_id: m.tool_call_id, content: textOf(m.content, at) };
}
