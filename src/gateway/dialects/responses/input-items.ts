// A Responses request's input items as chat messages. `instructions` is the
// caller's (request.ts); here: message items become messages (developer as
// system: few chat templates know a developer role), input_text/input_image
// parts become text and image_url parts; function_call items become the
// assistant's tool_calls (merged into the assistant message they follow, as
// chat wants one assistant turn); function_call_output items become
// role:tool messages. reasoning items are dropped from the history: no
// engine behind llmgw takes reasoning back. Separate from request.ts because
// it is the one part that walks untrusted nested data item by item.
import { bad, isObject, type Json } from '../../core/translation-refusal.js';

/** Input items as chat messages. `check`: validating only, so item references pass unresolved. */
export function chatMessages(items: readonly Json[], check: boolean): Json[] {
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
