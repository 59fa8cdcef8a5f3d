// A Chat Completions stream turned into Anthropic's Messages stream, as a
// small state machine: fed the engine's chunks one by one (already parsed),
// it returns the SSE text to send. Anthropic's sequence is message_start,
// then per content block content_block_start, its deltas and
// content_block_stop, then message_delta (the stop reason and usage) and
// message_stop. A chat stream says its finish reason before its usage
// chunk, so the end is written at [DONE] (or when the stream ends without
// one), with everything known.
//
// message_start carries the prompt's token count (LangChain's ChatAnthropic
// and others record input_tokens from it alone), which a chat stream says
// only in its last chunk. A translator told to hold (holdForCount) keeps
// message_start and all after it until the count is known: given by
// count() (the relay asks the replica's tokenizer while the engine
// prefills), or read from the first chunk that carries usage, or at the
// end. A translator not told to hold writes message_start at the first
// chunk, with the count if that chunk has one and 0 if not.
import { anthropicErrorBody } from './errors.js';
import type { AnthropicCall } from './request.js';
import { messageId, stopReasonOf, usageOf, type AnthropicUsage } from './response.js';

interface ChatChunk {
  id?: unknown;
  choices?: Array<{
    index?: unknown;
    delta?: {
      content?: unknown;
      tool_calls?: Array<{ index?: unknown; id?: unknown; function?: { name?: unknown; arguments?: unknown } }>;
    };
    finish_reason?: unknown;
    stop_reason?: unknown;
  }>;
  usage?: { prompt_tokens?: unknown; completion_tokens?: unknown } | null;
}

/** The block being written: text, or the tool call with this chat index. */
type OpenBlock = { kind: 'text' } | { kind: 'tool'; chatIndex: number };

export function sseEvent(type: string, data: unknown): string {
  return `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`;
}

export class MessageStreamTranslator {
  /** A chunk has come: the message's id is known. */
  private started = false;
  private startWritten = false;
  private messageIdText = '';
  private ended = false;
  /** message_start and what follows it are kept in `held` until the prompt's count is known. */
  private holding = false;
  private held = '';
  /** The prompt's count for message_start; null = not known (0 is written). */
  private inputTokens: number | null = null;
  /** Content blocks opened so far; the open one is the last. */
  private blocks = 0;
  private open: OpenBlock | null = null;
  private finish: unknown = null;
  private stopMatched: unknown = null;
  private usage: AnthropicUsage | null = null;

  constructor(
    private readonly call: AnthropicCall,
    /** Names the message when the engine's chunks carry no id (the request id). */
    private readonly fallbackId: string,
  ) {}

  /** Whether message_stop was written (the stream is complete). */
  get done(): boolean {
    return this.ended;
  }

  /**
   * Holds message_start, and every event after it, until the prompt's
   * count is known (count(), a chunk with usage, or the end). Only before
   * the first chunk; later it changes nothing.
   */
  holdForCount(): void {
    if (!this.started) this.holding = true;
  }

  /**
   * The prompt's token count, as the engine's tokenizer gave it (null: it
   * could not be had): what was held, message_start first. '' when nothing
   * is held (no chunk yet, or the count came from the stream first).
   */
  count(inputTokens: number | null): string {
    if (!this.holding) return '';
    this.holding = false;
    this.inputTokens = inputTokens;
    return this.emit('');
  }

  /** The events for one chat chunk. */
  push(chunk: ChatChunk): string {
    if (this.ended) return '';
    if (!this.started) {
      this.started = true;
      this.messageIdText = messageId(chunk.id, this.fallbackId);
    }
    let out = '';
    if (chunk.usage && typeof chunk.usage === 'object') {
      this.usage = usageOf(chunk.usage);
      // The engine's own count (its usage chunk, or usage on every chunk where it sends that) ends a hold.
      if (typeof chunk.usage.prompt_tokens === 'number' && this.inputTokens === null)
        this.inputTokens = chunk.usage.prompt_tokens;
    }
    // Anthropic has no `n`: only the first choice is translated.
    const choice = chunk.choices?.find((c) => (c.index ?? 0) === 0);
    if (!choice) return this.emit(out);
    const text = choice.delta?.content;
    if (typeof text === 'string' && text !== '') {
      if (this.open?.kind !== 'text') out += this.openBlock({ kind: 'text' }, { type: 'text', text: '' });
      out += sseEvent('content_block_delta', {
        type: 'content_block_delta',
        index: this.blocks - 1,
        delta: { type: 'text_delta', text },
      });
    }
    for (const tc of choice.delta?.tool_calls ?? []) {
      const chatIndex = typeof tc.index === 'number' ? tc.index : 0;
      if (this.open?.kind !== 'tool' || this.open.chatIndex !== chatIndex) {
        const id = typeof tc.id === 'string' ? tc.id : `toolu_${this.fallbackId}_${chatIndex}`;
        const name = typeof tc.function?.name === 'string' ? tc.function.name : '';
        out += this.openBlock({ kind: 'tool', chatIndex }, { type: 'tool_use', id, name, input: {} });
      }
      const args = tc.function?.arguments;
      if (typeof args === 'string' && args !== '') {
        out += sseEvent('content_block_delta', {
          type: 'content_block_delta',
          index: this.blocks - 1,
          delta: { type: 'input_json_delta', partial_json: args },
        });
      }
    }
    if (choice.finish_reason !== null && choice.finish_reason !== undefined) {
      this.finish = choice.finish_reason;
      this.stopMatched = choice.stop_reason;
    }
    return this.emit(out);
  }

  /** The end: the open block closed, message_delta with the stop reason and usage, message_stop. Once; '' after. */
  end(): string {
    if (this.ended) return '';
    if (!this.started) {
      this.started = true;
      this.messageIdText = messageId(undefined, this.fallbackId);
    }
    // Everything is known now: a hold ends with the engine's usage (or 0 without one).
    this.holding = false;
    if (this.inputTokens === null && this.usage !== null) this.inputTokens = this.usage.input_tokens;
    let out = this.closeBlock();
    this.ended = true;
    const stop = stopReasonOf(this.finish, this.stopMatched, this.call);
    const usage = this.usage ?? { input_tokens: 0, output_tokens: 0 };
    out += sseEvent('message_delta', {
      type: 'message_delta',
      delta: { stop_reason: stop.reason, stop_sequence: stop.sequence },
      usage: { input_tokens: usage.input_tokens, output_tokens: usage.output_tokens },
    });
    out += sseEvent('message_stop', { type: 'message_stop' });
    return this.emit(out);
  }

  /** An error event for a stream that broke after its first byte (Anthropic's SDKs raise it). */
  fail(message: string): string {
    if (this.ended) return '';
    this.ended = true;
    // What was held goes first (the client sees the stream as far as it got), then the error.
    this.holding = false;
    const before = this.held === '' ? '' : this.emit('');
    return before + sseEvent('error', JSON.parse(anthropicErrorBody(message, 500)));
  }

  /** `out` as it may be sent now: message_start and what was held before it, or '' while held (kept). */
  private emit(out: string): string {
    if (this.holding && this.inputTokens === null) {
      this.held += out;
      return '';
    }
    this.holding = false;
    let head = '';
    if (this.started && !this.startWritten) {
      this.startWritten = true;
      head = this.messageStart();
    }
    const all = head + this.held + out;
    this.held = '';
    return all;
  }

  private messageStart(): string {
    return sseEvent('message_start', {
      type: 'message_start',
      message: {
        id: this.messageIdText,
        type: 'message',
        role: 'assistant',
        model: this.call.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        // output_tokens is known at the end only: message_delta has both counts.
        usage: { input_tokens: this.inputTokens ?? 0, output_tokens: 0 },
      },
    });
  }

  private openBlock(block: OpenBlock, contentBlock: unknown): string {
    const out = this.closeBlock();
    this.open = block;
    this.blocks++;
    return (
      out +
      sseEvent('content_block_start', {
        type: 'content_block_start',
        index: this.blocks - 1,
        content_block: contentBlock,
      })
    );
  }

  private closeBlock(): string {
    if (!this.open) return '';
    this.open = null;
    return sseEvent('content_block_stop', { type: 'content_block_stop', index: this.blocks - 1 });
  }
}
