// A Responses API answer, whole or streamed, turned into the Chat
// Completions answer the gateway's relays read: the reverse of response.ts
// and stream.ts, for a remote that speaks the Responses API
// (remote-request.ts sent it the request). Pure: a parsed Response or one
// parsed stream event in, chat's JSON or SSE text out; the relay that feeds
// it is src/gateway/remote/foreign.ts. The usage chat carries is what the
// router counts and charges, so it is read from the remote's own counts.
import { isObject, type Json } from '../../core/translation-refusal.js';
import { chatUsageOf, finishOf } from './response.js';

/** A chat completion id from a response id (`resp_x` is `chatcmpl-x`). */
function chatId(id: unknown): string {
  return `chatcmpl-${typeof id === 'string' ? id.replace(/^resp_/, '') : 'remote'}`;
}

/** A whole Response as a chat completion; `nowS`: its `created`. */
export function responseToCompletion(response: Json, nowS: number): Json {
  let text = '';
  let refusal = '';
  let reasoning = '';
  const calls: Json[] = [];
  for (const item of Array.isArray(response.output) ? response.output : []) {
    if (!isObject(item)) continue;
    if (item.type === 'function_call') {
      const args = typeof item.arguments === 'string' ? item.arguments : '{}';
      calls.push({ id: item.call_id, type: 'function', function: { name: item.name, arguments: args } });
      continue;
    }
    const parts = item.type === 'reasoning' ? item.content : item.type === 'message' ? item.content : null;
    for (const p of Array.isArray(parts) ? parts : []) {
      if (!isObject(p)) continue;
      if (p.type === 'output_text' && typeof p.text === 'string') text += p.text;
      else if (p.type === 'refusal' && typeof p.refusal === 'string') refusal += p.refusal;
      else if (p.type === 'reasoning_text' && typeof p.text === 'string') reasoning += p.text;
    }
  }
  const message: Json = { role: 'assistant', content: text === '' && (calls.length || refusal) ? null : text };
  if (refusal !== '') message.refusal = refusal;
  if (reasoning !== '') message.reasoning_content = reasoning;
  if (calls.length) message.tool_calls = calls;
  return {
    id: chatId(response.id),
    object: 'chat.completion',
    created: nowS,
    model: response.model,
    choices: [{ index: 0, message, finish_reason: finishOf(response) }],
    usage: chatUsageOf(response.usage),
  };
}

/**
 * A Responses stream as a chat stream, one event at a time:
 * response.created opens it (the assistant role); text, refusal and
 * reasoning deltas become chat's content, refusal and reasoning_content;
 * each function_call item a tool call index of its own, its argument
 * deltas that call's; response.completed (or .incomplete) the finish
 * reason, the usage chunk (when the request asked for it) and [DONE].
 * response.failed and `error` are chat's error chunk.
 */
export class ResponsesToChatStream {
  private id = chatId(undefined);
  private model: unknown = '';
  /** Chat's tool call index for each function_call item, by its output_index, and whether its arguments came in deltas. */
  private readonly tools = new Map<number, { index: number; streamed: boolean }>();
  private done = false;

  constructor(
    /** The chat request asked for a usage chunk (stream_options.include_usage). */
    private readonly includeUsage: boolean,
    private readonly nowS: number,
  ) {}

  /** Chat SSE text for one event's data; '' when it carries nothing chat has. */
  push(event: Json): string {
    if (this.done) return '';
    const delta = typeof event.delta === 'string' ? event.delta : '';
    switch (event.type) {
      case 'response.created': {
        const r = isObject(event.response) ? event.response : {};
        this.id = chatId(r.id);
        this.model = r.model;
        return this.chunk({ role: 'assistant', content: '' });
      }
      case 'response.output_item.added': {
        const item = isObject(event.item) ? event.item : {};
        if (item.type !== 'function_call' || typeof event.output_index !== 'number') return '';
        const index = this.tools.size;
        this.tools.set(event.output_index, { index, streamed: false });
        return this.chunk({
          tool_calls: [{ index, id: item.call_id, type: 'function', function: { name: item.name, arguments: '' } }],
        });
      }
      case 'response.function_call_arguments.delta': {
        const tool = typeof event.output_index === 'number' ? this.tools.get(event.output_index) : undefined;
        if (!tool || delta === '') return '';
        tool.streamed = true;
        return this.chunk({ tool_calls: [{ index: tool.index, function: { arguments: delta } }] });
      }
      case 'response.output_item.done': {
        // A remote that sent a call's arguments only whole, in the item's end.
        const tool = typeof event.output_index === 'number' ? this.tools.get(event.output_index) : undefined;
        const args = isObject(event.item) ? event.item.arguments : undefined;
        if (!tool || tool.streamed || typeof args !== 'string' || args === '') return '';
        tool.streamed = true;
        return this.chunk({ tool_calls: [{ index: tool.index, function: { arguments: args } }] });
      }
      case 'response.output_text.delta':
        return delta === '' ? '' : this.chunk({ content: delta });
      case 'response.refusal.delta':
        return delta === '' ? '' : this.chunk({ refusal: delta });
      case 'response.reasoning_text.delta':
        return delta === '' ? '' : this.chunk({ reasoning_content: delta });
      case 'response.completed':
      case 'response.incomplete': {
        const r = isObject(event.response) ? event.response : {};
        return this.chunk({}, finishOf(r)) + this.end(r.usage);
      }
      case 'response.failed': {
        const r = isObject(event.response) ? event.response : {};
        return this.fail(isObject(r.error) ? r.error.message : undefined);
      }
      case 'error':
        return this.fail(event.message);
      default:
        // created's in_progress twin, content parts opening and closing, the *.done events: nothing chat has.
        return '';
    }
  }

  /** The usage chunk (when asked for) and [DONE]; '' once written. Also for a stream that ends without its last event. */
  end(usage?: unknown): string {
    if (this.done) return '';
    this.done = true;
    // No usage chunk from a stream cut before its last event: the router then counts what was relayed.
    const chunk = this.includeUsage && isObject(usage) ? this.line({ choices: [], usage: chatUsageOf(usage) }) : '';
    return `${chunk}data: [DONE]\n\n`;
  }

  private fail(message: unknown): string {
    this.done = true;
    const text = typeof message === 'string' && message !== '' ? message : 'the remote failed mid-response';
    return `data: ${JSON.stringify({ error: { message: text, type: 'api_error' } })}\n\n`;
  }

  private chunk(delta: Json, finish: string | null = null): string {
    return this.line({ choices: [{ index: 0, delta, finish_reason: finish }] });
  }

  private line(body: Json): string {
    const chunk = { id: this.id, object: 'chat.completion.chunk', created: this.nowS, model: this.model, ...body };
    return `data: ${JSON.stringify(chunk)}\n\n`;
  }
}
