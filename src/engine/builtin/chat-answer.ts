// A chat answer in OpenAI's shapes once the runtime has produced it: the
// message of each choice (text, or tool calls with JSON arguments) and, for
// streams, the deltas of each choice as its text arrives. Apart from
// server.ts because what a delta carries depends on the ChatOutput (text is
// content, or a forced call's arguments, or nothing until the call is
// whole), and that decision is easier to read in one place.
import type { ChatResult } from './llama-runtime.js';
import { chatLogprobs, openAiFinishReason } from './openai.js';
import { toolCallId, type ChatOutput, type ToolCall } from './tools.js';

interface OpenAiToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

function openAiToolCalls(calls: readonly ToolCall[]): OpenAiToolCall[] {
  return calls.map((call) => ({
    id: toolCallId(),
    type: 'function',
    function: { name: call.name, arguments: call.arguments },
  }));
}

/** One choice of a `chat.completion`; content is null when the answer is tool calls, as OpenAI sends it. */
export function chatChoice(index: number, result: ChatResult) {
  const calls = result.toolCalls.length > 0 ? openAiToolCalls(result.toolCalls) : undefined;
  return {
    index,
    message: {
      role: 'assistant' as const,
      content: calls && result.text === '' ? null : result.text,
      refusal: null,
      ...(calls ? { tool_calls: calls } : {}),
    },
    logprobs: chatLogprobs(result.logprobs),
    finish_reason: openAiFinishReason(result.finishReason),
  };
}

/** What a choice's stream opens with: the role, and content null when the answer is a forced call. */
export function openingDelta(output: ChatOutput): object {
  return { role: 'assistant', content: output.kind === 'forcedTool' ? null : '' };
}

/**
 * The deltas of one streamed choice. Text is content, except for a forced
 * call: with one tool the text is its arguments, streamed as OpenAI streams
 * them (the call's id and name first, then pieces of `arguments`); with
 * several the grammar writes `{"name", "arguments"}` and the call goes out
 * whole once it is done. Calls the model made in its template's syntax
 * also go out whole, at the end.
 */
export class ChoiceDeltas {
  private callOpened = false;

  constructor(private readonly output: ChatOutput) {}

  /** Text is the message's content: its delta is always `{ content: text }` (the server writes those through a template). */
  get textIsContent(): boolean {
    return this.output.kind !== 'forcedTool';
  }

  /** The delta for a piece of generated text; undefined when nothing can be said yet. */
  text(text: string): object | undefined {
    if (this.output.kind !== 'forcedTool') return { content: text };
    if (this.output.tools.length > 1) return undefined;
    const tool = this.output.tools[0]!;
    if (this.callOpened) return { tool_calls: [{ index: 0, function: { arguments: text } }] };
    this.callOpened = true;
    return {
      tool_calls: [{ index: 0, id: toolCallId(), type: 'function', function: { name: tool.name, arguments: text } }],
    };
  }

  /** The deltas still owed once the choice is done: whole calls not streamed piece by piece. */
  end(result: ChatResult): object[] {
    if (this.output.kind === 'forcedTool' && this.output.tools.length === 1) {
      // A call whose arguments were empty text never opened; it still has to be named.
      return this.callOpened ? [] : [this.text('')!];
    }
    return openAiToolCalls(result.toolCalls).map((call, index) => ({ tool_calls: [{ index, ...call }] }));
  }
}
