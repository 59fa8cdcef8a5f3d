// A Chat Completions stream turned into the Responses API's stream, as a
// small state machine: fed the engine's chunks one by one (already parsed),
// it returns the SSE text to send. The sequence clients parse (the openai
// SDK's ResponseStream rebuilds the response from it, and refuses a delta
// for an item or part it was not told of) is response.created and
// response.in_progress, then per output item output_item.added, its content
// part's added, deltas, done and content_part.done (function calls: argument
// deltas and done), output_item.done, and at the end response.completed (or
// .incomplete) carrying the whole Response. Every event has a
// sequence_number counting from 0. A chat stream says its finish reason
// before its usage chunk, so the end is written at [DONE] (or when the
// stream ends without one), with everything known.
import type { ResponsesCall } from './request.js';
import {
  functionCallItem,
  logprobsOf,
  messageItem,
  newId,
  reasoningItem,
  reasoningOf,
  responseShell,
  statusOf,
  usageOf,
  type ResponseIdentity,
  type ResponseObject,
  type ResponsesUsage,
} from './response.js';

type Json = Record<string, unknown>;

interface ChatChunk {
  choices?: Array<{
    index?: unknown;
    delta?: {
      content?: unknown;
      reasoning?: unknown;
      reasoning_content?: unknown;
      tool_calls?: Array<{ index?: unknown; id?: unknown; function?: { name?: unknown; arguments?: unknown } }>;
    };
    finish_reason?: unknown;
    logprobs?: { content?: Parameters<typeof logprobsOf>[0] } | null;
  }>;
  usage?: Parameters<typeof usageOf>[0];
}

/** The output item being written, with what it has gathered so far. */
type OpenItem =
  | { kind: 'reasoning'; id: string; text: string }
  | { kind: 'message'; id: string; text: string; logprobs: Json[] | null }
  | { kind: 'function_call'; id: string; chatIndex: number; callId: string; name: string; args: string };

export class ResponseStreamTranslator {
  private sequence = 0;
  private started = false;
  private ended = false;
  private readonly shell: ResponseObject;
  /** Output items finished so far, in order; the open one is not among them. */
  private readonly output: Json[] = [];
  private open: OpenItem | null = null;
  private finish: unknown = null;
  private usage: ResponsesUsage | null = null;
  private final: ResponseObject | undefined;

  constructor(call: ResponsesCall, identity: ResponseIdentity = {}) {
    this.shell = responseShell(call, identity);
  }

  /** The response's id (`resp_…`), known from the start. */
  get id(): string {
    return this.shell.id;
  }

  /** Whether the last event (completed, incomplete or failed) was written. */
  get done(): boolean {
    return this.ended;
  }

  /** The whole Response as the last event carried it, for the response store; undefined until done. */
  get response(): ResponseObject | undefined {
    return this.final;
  }

  /** The events for one chat chunk. */
  push(chunk: ChatChunk): string {
    if (this.ended) return '';
    let out = this.start();
    if (chunk.usage && typeof chunk.usage === 'object') this.usage = usageOf(chunk.usage);
    // Responses has no `n`: only the first choice is translated.
    const choice = chunk.choices?.find((c) => (c.index ?? 0) === 0);
    if (!choice) return out;
    const reasoning = reasoningOf(choice.delta);
    if (reasoning !== '') {
      if (this.open?.kind !== 'reasoning') out += this.openItem({ kind: 'reasoning', id: newId('rs'), text: '' });
      const item = this.open as Extract<OpenItem, { kind: 'reasoning' }>;
      item.text += reasoning;
      out += this.event('response.reasoning_text.delta', {
        item_id: item.id,
        output_index: this.output.length,
        content_index: 0,
        delta: reasoning,
      });
    }
    const text = choice.delta?.content;
    if (typeof text === 'string' && text !== '') {
      if (this.open?.kind !== 'message')
        out += this.openItem({ kind: 'message', id: newId('msg'), text: '', logprobs: null });
      const item = this.open as Extract<OpenItem, { kind: 'message' }>;
      item.text += text;
      const logprobs = choice.logprobs?.content ? logprobsOf(choice.logprobs.content) : [];
      if (choice.logprobs?.content) item.logprobs = [...(item.logprobs ?? []), ...logprobs];
      out += this.event('response.output_text.delta', {
        item_id: item.id,
        output_index: this.output.length,
        content_index: 0,
        delta: text,
        logprobs,
      });
    }
    for (const tc of choice.delta?.tool_calls ?? []) {
      const chatIndex = typeof tc.index === 'number' ? tc.index : 0;
      if (this.open?.kind !== 'function_call' || this.open.chatIndex !== chatIndex) {
        const callId = typeof tc.id === 'string' && tc.id !== '' ? tc.id : `call_${chatIndex}_${newId('fc').slice(3)}`;
        const name = typeof tc.function?.name === 'string' ? tc.function.name : '';
        out += this.openItem({ kind: 'function_call', id: newId('fc'), chatIndex, callId, name, args: '' });
      }
      const item = this.open as Extract<OpenItem, { kind: 'function_call' }>;
      const args = tc.function?.arguments;
      if (typeof args === 'string' && args !== '') {
        item.args += args;
        out += this.event('response.function_call_arguments.delta', {
          item_id: item.id,
          output_index: this.output.length,
          delta: args,
        });
      }
    }
    if (choice.finish_reason !== null && choice.finish_reason !== undefined) this.finish = choice.finish_reason;
    return out;
  }

  /** The end: the open item closed, then response.completed (or .incomplete) with the whole Response. Once; '' after. */
  end(): string {
    if (this.ended) return '';
    const status = statusOf(this.finish);
    // The item the token limit cut is incomplete, as in the whole answer.
    let out = this.start() + this.closeItem(status.status === 'completed' ? 'completed' : 'incomplete');
    this.ended = true;
    const response: ResponseObject = {
      ...this.shell,
      ...status,
      output: [...this.output],
      usage: this.usage ?? usageOf(null),
    };
    this.final = response;
    out += this.event(status.status === 'completed' ? 'response.completed' : 'response.incomplete', { response });
    return out;
  }

  /**
   * response.failed for a stream that broke after its first byte (the
   * engine went away, or said an error mid-stream): what was written so far
   * is in its output, marked incomplete. Once; '' after. `message` reaches
   * the client: say what happened, never internals.
   */
  fail(message: string): string {
    if (this.ended) return '';
    let out = this.start();
    this.ended = true;
    const partial = this.open ? [this.itemOf(this.open, 'incomplete')] : [];
    this.open = null;
    const response: ResponseObject = {
      ...this.shell,
      status: 'failed',
      error: { code: 'server_error', message },
      output: [...this.output, ...partial],
      usage: this.usage,
    };
    this.final = response;
    out += this.event('response.failed', { response });
    return out;
  }

  private event(type: string, data: Json): string {
    return `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: this.sequence++, ...data })}\n\n`;
  }

  private start(): string {
    if (this.started) return '';
    this.started = true;
    return (
      this.event('response.created', { response: this.shell }) +
      this.event('response.in_progress', { response: this.shell })
    );
  }

  private openItem(item: OpenItem): string {
    let out = this.closeItem('completed');
    this.open = item;
    const at = { output_index: this.output.length };
    out += this.event('response.output_item.added', { ...at, item: this.itemOf(item, 'in_progress') });
    if (item.kind === 'message') {
      out += this.event('response.content_part.added', {
        item_id: item.id,
        ...at,
        content_index: 0,
        part: { type: 'output_text', text: '', annotations: [] },
      });
    } else if (item.kind === 'reasoning') {
      out += this.event('response.content_part.added', {
        item_id: item.id,
        ...at,
        content_index: 0,
        part: { type: 'reasoning_text', text: '' },
      });
    }
    return out;
  }

  private closeItem(status: 'completed' | 'incomplete'): string {
    const item = this.open;
    if (!item) return '';
    this.open = null;
    const at = { item_id: item.id, output_index: this.output.length };
    let out = '';
    if (item.kind === 'message') {
      out += this.event('response.output_text.done', {
        ...at,
        content_index: 0,
        text: item.text,
        logprobs: item.logprobs ?? [],
      });
      const part: Json = { type: 'output_text', text: item.text, annotations: [] };
      if (item.logprobs) part.logprobs = item.logprobs;
      out += this.event('response.content_part.done', { ...at, content_index: 0, part });
    } else if (item.kind === 'reasoning') {
      out += this.event('response.reasoning_text.done', { ...at, content_index: 0, text: item.text });
      out += this.event('response.content_part.done', {
        ...at,
        content_index: 0,
        part: { type: 'reasoning_text', text: item.text },
      });
    } else {
      out += this.event('response.function_call_arguments.done', { ...at, name: item.name, arguments: item.args });
    }
    const done = this.itemOf(item, status);
    this.output.push(done);
    out += this.event('response.output_item.done', { output_index: this.output.length - 1, item: done });
    return out;
  }

  private itemOf(item: OpenItem, status: 'completed' | 'incomplete' | 'in_progress'): Json {
    const inProgress = status === 'in_progress';
    if (item.kind === 'message') {
      const whole = messageItem(item.id, item.text, status, item.logprobs ?? undefined);
      // The added event's message has no parts yet: content_part.added brings the one it gets.
      return inProgress ? { ...whole, content: [] } : whole;
    }
    if (item.kind === 'reasoning') {
      const whole = reasoningItem(item.id, item.text, status);
      return inProgress ? { ...whole, content: [] } : whole;
    }
    return functionCallItem(item.id, item.callId, item.name, item.args, status);
  }
}
