// An Anthropic Messages answer, whole or streamed, turned into the Chat
// Completions answer the gateway's relays read: the reverse of response.ts
// and stream.ts, for a remote that speaks Anthropic (remote-request.ts sent
// it the request). Pure: a parsed message or one parsed stream event in,
// chat's JSON or SSE text out; the relay that feeds it is
// src/gateway/remote/foreign.ts. The usage chat carries is what the router
// counts and charges, so it is read from the remote's own counts.
import { isObject, type Json } from '../../core/translation-refusal.js';
import { chatUsageOf, finishReasonOf } from './response.js';

/** A chat completion id from a message id (`msg_x` is `chatcmpl-x`, as messageId() maps the other way). */
function chatId(id: unknown): string {
  return `chatcmpl-${typeof id === 'string' ? id.replace(/^msg_/, '') : 'remote'}`;
}

/** A whole Message as a chat completion; `nowS`: its `created`. */
export function messageToCompletion(message: Json, nowS: number): Json {
  let text = '';
  let reasoning = '';
  const calls: Json[] = [];
  for (const b of Array.isArray(message.content) ? message.content : []) {
    if (!isObject(b)) continue;
    if (b.type === 'text' && typeof b.text === 'string') text += b.text;
    else if (b.type === 'thinking' && typeof b.thinking === 'string') reasoning += b.thinking;
    else if (b.type === 'tool_use')
      calls.push({
        id: b.id,
        type: 'function',
        function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) },
      });
  }
  const msg: Json = { role: 'assistant', content: text === '' && calls.length ? null : text };
  if (reasoning !== '') msg.reasoning_content = reasoning;
  if (calls.length) msg.tool_calls = calls;
  const choice: Json = { index: 0, message: msg, finish_reason: finishReasonOf(message.stop_reason) ?? 'stop' };
  // The stop sequence that matched, where vLLM says it: the Messages dialect reads it back as stop_sequence.
  if (typeof message.stop_sequence === 'string') choice.stop_reason = message.stop_sequence;
  return {
    id: chatId(message.id),
    object: 'chat.completion',
    created: nowS,
    model: message.model,
    choices: [choice],
    usage: chatUsageOf(message.usage),
  };
}

/**
 * A Messages stream as a chat stream, one event at a time: message_start
 * opens it (the assistant role), text, thinking and tool_use blocks become
 * content, reasoning_content and tool_calls deltas (each tool_use block a
 * tool call index of its own), message_delta the finish reason, and
 * message_stop the usage chunk (when the request asked for it) and [DONE].
 * An `error` event is chat's error chunk.
 */
export class MessagesToChatStream {
  private id = chatId(undefined);
  private model: unknown = '';
  private usage: Json = {};
  /** Chat's tool call index for each open tool_use block, by the block's index. */
  private readonly tools = new Map<number, number>();
  private done = false;

  constructor(
    /** The chat request asked for a usage chunk (stream_options.include_usage). */
    private readonly includeUsage: boolean,
    private readonly nowS: number,
  ) {}

  /** Chat SSE text for one event's data; '' when it carries nothing chat has. */
  push(event: Json): string {
    if (this.done) return '';
    switch (event.type) {
      case 'message_start': {
        const m = isObject(event.message) ? event.message : {};
        this.id = chatId(m.id);
        this.model = m.model;
        this.usage = isObject(m.usage) ? { ...m.usage } : {};
        return this.chunk({ role: 'assistant', content: '' });
      }
      case 'content_block_start': {
        const b = isObject(event.content_block) ? event.content_block : {};
        if (b.type === 'text' && typeof b.text === 'string' && b.text !== '') return this.chunk({ content: b.text });
        if (b.type !== 'tool_use' || typeof event.index !== 'number') return '';
        const index = this.tools.size;
        this.tools.set(event.index, index);
        return this.chunk({
          tool_calls: [{ index, id: b.id, type: 'function', function: { name: b.name, arguments: '' } }],
        });
      }
      case 'content_block_delta': {
        const d = isObject(event.delta) ? event.delta : {};
        if (d.type === 'text_delta' && typeof d.text === 'string') return this.chunk({ content: d.text });
        if (d.type === 'thinking_delta' && typeof d.thinking === 'string')
          return this.chunk({ reasoning_content: d.thinking });
        const index = typeof event.index === 'number' ? this.tools.get(event.index) : undefined;
        if (d.type === 'input_json_delta' && typeof d.partial_json === 'string' && index !== undefined)
          return this.chunk({ tool_calls: [{ index, function: { arguments: d.partial_json } }] });
        return '';
      }
      case 'message_delta': {
        const d = isObject(event.delta) ? event.delta : {};
        // message_delta's usage is cumulative: its counts replace message_start's.
        if (isObject(event.usage)) for (const [k, v] of Object.entries(event.usage)) if (v !== null) this.usage[k] = v;
        const extra = typeof d.stop_sequence === 'string' ? { stop_reason: d.stop_sequence } : {};
        return this.chunk({}, finishReasonOf(d.stop_reason) ?? 'stop', extra);
      }
      case 'message_stop':
        return this.end();
      case 'error': {
        this.done = true;
        const e = isObject(event.error) ? event.error : {};
        const message = typeof e.message === 'string' ? e.message : 'the remote failed mid-response';
        return `data: ${JSON.stringify({ error: { message, type: e.type ?? 'api_error' } })}\n\n`;
      }
      default:
        // ping, content_block_stop, signature deltas: nothing chat has.
        return '';
    }
  }

  /** The usage chunk (when asked for) and [DONE]; '' once written. Also for a stream that ends without message_stop. */
  end(): string {
    if (this.done) return '';
    this.done = true;
    const usage = this.includeUsage ? this.line({ choices: [], usage: chatUsageOf(this.usage) }) : '';
    return `${usage}data: [DONE]\n\n`;
  }

  private chunk(delta: Json, finish: string | null = null, extra: Json = {}): string {
    return this.line({ choices: [{ index: 0, delta, finish_reason: finish, ...extra }] });
  }

  private line(body: Json): string {
    const chunk = { id: this.id, object: 'chat.completion.chunk', created: this.nowS, model: this.model, ...body };
    return `data: ${JSON.stringify(chunk)}\n\n`;
  }
}
