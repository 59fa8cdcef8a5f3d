// A Chat Completions request turned into an OpenAI Responses request, for a
// remote endpoint that speaks the Responses API (`api: responses`): the
// reverse of request.ts and input-items.ts, which turn a client's Responses
// request into chat. Pure: the internal chat body in (after the router's
// own rewrites: the served model name, stream_options, a key's max_tokens
// cap), a Responses body out, or a throw naming what the Responses API
// cannot express (the router then tries another replica). The answer comes
// back through remote-answer.ts.
//
// Mapping: every message becomes an input item (system and developer keep
// their role), text and image parts input_text and input_image parts; an
// assistant's tool_calls become function_call items after its text, role
// tool messages function_call_output items. `store: false`: the remote
// keeps nothing, llmgw sends the whole conversation every time.
import { bad, isObject, type Json } from '../../core/translation-refusal.js';
import { responsesToolChoice, responsesTools, textFormat } from './tools.js';

/** Chat fields whose meaning the Responses API cannot carry: a request using them is not sent to such a remote. */
const REFUSED: ReadonlyArray<readonly [string, (v: unknown) => boolean]> = [
  ['n', (v) => typeof v === 'number' && v > 1],
  ['stop', (v) => (typeof v === 'string' && v !== '') || (Array.isArray(v) && v.length > 0)],
  ['logit_bias', (v) => isObject(v) && Object.keys(v).length > 0],
  ['audio', (v) => v !== undefined && v !== null],
];

/** The Responses body for a chat body; throws LLMGW_BAD_REQUEST naming what cannot be sent. */
export function toResponsesRequest(chat: Json): Json {
  for (const [field, refused] of REFUSED) {
    if (refused(chat[field]))
      throw bad(field, `${field}: the remote speaks OpenAI's Responses API, which has no counterpart`);
  }
  if (!Array.isArray(chat.messages)) throw bad('messages', 'messages: want a list');
  const input: Json[] = [];
  chat.messages.forEach((m, i) => input.push(...inputItems(m, `messages[${i}]`)));
  const body: Json = { model: chat.model, input, store: false };
  if (chat.stream === true) body.stream = true;
  const max = [chat.max_completion_tokens, chat.max_tokens].find((v) => typeof v === 'number');
  if (max !== undefined) body.max_output_tokens = max;
  for (const field of ['temperature', 'top_p', 'parallel_tool_calls', 'user'] as const)
    if (chat[field] !== undefined && chat[field] !== null) body[field] = chat[field];
  if (Array.isArray(chat.tools) && chat.tools.length) body.tools = responsesTools(chat.tools);
  if (chat.tool_choice !== undefined && chat.tool_choice !== null)
    body.tool_choice = responsesToolChoice(chat.tool_choice);
  if (chat.response_format !== undefined && chat.response_format !== null)
    body.text = { format: textFormat(chat.response_format) };
  if (typeof chat.reasoning_effort === 'string') body.reasoning = { effort: chat.reasoning_effort };
  if (chat.logprobs === true) {
    body.include = ['message.output_text.logprobs'];
    if (typeof chat.top_logprobs === 'number') body.top_logprobs = chat.top_logprobs;
  }
  return body;
}

function inputItems(m: unknown, at: string): Json[] {
  if (!isObject(m)) throw bad('messages', `${at}: want an object`);
  switch (m.role) {
    case 'system':
    case 'developer':
      return [{ type: 'message', role: m.role, content: textOf(m.content, at) }];
    case 'user':
      return [{ type: 'message', role: 'user', content: userParts(m.content, at) }];
    case 'assistant': {
      const items: Json[] = [];
      const text = textOf(m.content, at);
      if (text !== '') items.push({ type: 'message', role: 'assistant', content: text });
      (Array.isArray(m.tool_calls) ? m.tool_calls : []).forEach((c, k) => {
        const fn = isObject(c) && isObject(c.function) ? c.function : null;
        if (!fn || typeof fn.name !== 'string' || typeof c.id !== 'string')
          throw bad('messages', `${at}.tool_calls[${k}]: want {"id", "function": {"name", "arguments"}}`);
        const args = typeof fn.arguments === 'string' ? fn.arguments : '{}';
        items.push({ type: 'function_call', call_id: c.id, name: fn.name, arguments: args });
      });
      return items;
    }
    case 'tool':
      if (typeof m.tool_call_id !== 'string') throw bad('messages', `${at}.tool_call_id: want the id of the call`);
      return [{ type: 'function_call_output', call_id: m.tool_call_id, output: textOf(m.content, at) }];
    default:
      throw bad('messages', `${at}.role: ${JSON.stringify(m.role)} has no Responses counterpart`);
  }
}

function textOf(content: unknown, at: string): string {
  if (typeof content === 'string') return content;
  if (content === null || content === undefined) return '';
  if (!Array.isArray(content)) throw bad('messages', `${at}.content: want a string or a list of parts`);
  return content
    .map((p, k) => {
      if (isObject(p) && p.type === 'text' && typeof p.text === 'string') return p.text;
      throw bad('messages', `${at}.content[${k}]: only text parts can be sent here to a Responses API`);
    })
    .join('\n');
}

function userParts(content: unknown, at: string): string | Json[] {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) throw bad('messages', `${at}.content: want a string or a list of parts`);
  return content.map((p, k) => {
    if (isObject(p) && p.type === 'text' && typeof p.text === 'string') return { type: 'input_text', text: p.text };
    const image = isObject(p) && p.type === 'image_url' && isObject(p.image_url) ? p.image_url : null;
    if (image && typeof image.url === 'string') {
      const part: Json = { type: 'input_image', image_url: image.url };
      part.detail = image.detail === 'low' || image.detail === 'high' ? image.detail : 'auto';
      return part;
    }
    throw bad(
      'messages',
      `${at}.content[${k}]: a ${JSON.stringify(isObject(p) ? p.type : p)} part cannot be sent to a Responses API`,
    );
  });
}
