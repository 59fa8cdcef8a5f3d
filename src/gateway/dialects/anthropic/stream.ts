// A Chat Completions stream turned into Anthropic's Messages stream, as a
// small state machine: fed the engine's chunks one by one (already parsed),
// it returns the SSE text to send. Anthropic's sequence is message_start,
// then per content block content_block_start, its deltas and
// content_block_stop, then message_delta (the stop reason and usage) and
// message_stop. A chat stream says its finish reason before its usage
// chunk, so the end is written at [DONE] (or when the stream ends without
// one), with everything known.
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
  private started = false;
  private ended = false;
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

  /** The events for one chat chunk. */
  push(chunk: ChatChunk): string {
    if (this.ended) return '';
    let out = this.start(chunk.id);
    if (chunk.usage && typeof chunk.usage === 'object') this.usage = usageOf(chunk.usage);
    // Anthropic has no `n`: only the first choice is translated.
    const choice = chunk.choices?.find((c) => (c.index ?? 0) === 0);
    if (!choice) return out;
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
    return out;
  }

  /** The end: the open block closed, message_delta with the stop reason and usage, message_stop. Once; '' after. */
  end(): string {
    if (this.ended) return '';
    let out = this.start(undefined) + this.closeBlock();
    this.ended = true;
    const stop = stopReasonOf(this.finish, this.stopMatched, this.call);
    const usage = this.usage ?? { input_tokens: 0, output_tokens: 0 };
    out += sseEvent('message_delta', {
      type: 'message_delta',
      delta: { stop_reason: stop.reason, stop_sequence: stop.sequence },
      usage: { input_tokens: usage.input_tokens, output_tokens: usage.output_tokens },
    });
    out += sseEvent('message_stop', { type: 'message_stop' });
    return out;
  }

  /** An error event for a stream that broke after its first byte (Anthropic's SDKs raise it). */
  fail(message: string): string {
    if (this.ended) return '';
    this.ended = true;
    return sseEvent('error', JSON.parse(anthropicErrorBody(message, 500)));
  }

  private start(chatId: unknown): string {
    if (this.started) return '';
    this.started = true;
    return sseEvent('message_start', {
      type: 'message_start',
      message: {
        id: messageId(chatId, this.fallbackId),
        type: 'message',
        role: 'assistant',
        model: this.call.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        // Not known until the engine's usage chunk, at the end: message_delta has both counts.
        usage: { input_tokens: 0, output_tokens: 0 },
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
