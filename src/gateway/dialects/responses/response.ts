// A Chat Completions answer turned into a Responses API Response: the first
// choice's reasoning as a reasoning item, its text as a message item, each
// tool call as a function_call item, its finish reason as the status and its
// usage in the Responses names, with the request's settings echoed as
// OpenAI echoes them. Pure, shared by the whole answer and the stream's end
// (stream.ts); also what a kept response's conversation is (keptItems).
import { randomBytes } from 'node:crypto';
import type { ResponsesCall } from './request.js';

type Json = Record<string, unknown>;

export type ResponseStatus = 'completed' | 'incomplete' | 'failed' | 'in_progress';

export interface ResponsesUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

/** A Response object as clients parse it (the fields llmgw fills; echoes are in `Json`). */
export interface ResponseObject extends Json {
  id: string;
  object: 'response';
  created_at: number;
  status: ResponseStatus;
  error: { code: string; message: string } | null;
  incomplete_details: { reason: 'max_output_tokens' | 'content_filter' } | null;
  model: string;
  output: Json[];
  usage: ResponsesUsage | null;
}

/** When and under what id a response is made; absent = now, and a new id. */
export interface ResponseIdentity {
  /** `resp_…`; the router may choose it (to name the response in its logs before the answer). */
  readonly id?: string;
  /** Seconds since the epoch, as Responses' created_at is. */
  readonly createdAtS?: number;
}

/** A new id with OpenAI's prefixes: `resp`, `msg`, `fc`, `rs`. Random, so ids never collide across keys or control planes. */
export function newId(prefix: 'resp' | 'msg' | 'fc' | 'rs'): string {
  return `${prefix}_${randomBytes(16).toString('hex')}`;
}

interface ChatUsage {
  prompt_tokens?: unknown;
  completion_tokens?: unknown;
  total_tokens?: unknown;
  prompt_tokens_details?: { cached_tokens?: unknown } | null;
  completion_tokens_details?: { reasoning_tokens?: unknown } | null;
}

function count(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) ? v : 0;
}

/** Chat usage in the Responses names; an absent count is 0. */
export function usageOf(usage: ChatUsage | null | undefined): ResponsesUsage {
  const input = count(usage?.prompt_tokens);
  const output = count(usage?.completion_tokens);
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: count(usage?.prompt_tokens_details?.cached_tokens) },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: count(usage?.completion_tokens_details?.reasoning_tokens) },
    total_tokens: input + output,
  };
}

/** The status a chat finish reason gives: cut by the token limit or a filter is incomplete, anything else completed. */
export function statusOf(finish: unknown): Pick<ResponseObject, 'status' | 'incomplete_details'> {
  if (finish === 'length') return { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } };
  if (finish === 'content_filter') return { status: 'incomplete', incomplete_details: { reason: 'content_filter' } };
  return { status: 'completed', incomplete_details: null };
}

/**
 * The other way, for an answer from a remote that speaks the Responses API:
 * chat's finish reason for a Response's status (incomplete by the token
 * limit is `length`, by a filter `content_filter`; a completed one that
 * called a function `tool_calls`, any other `stop`).
 */
export function finishOf(response: {
  status?: unknown;
  incomplete_details?: unknown;
  output?: unknown;
}): 'stop' | 'length' | 'content_filter' | 'tool_calls' {
  const reason = (response.incomplete_details as { reason?: unknown } | null | undefined)?.reason;
  if (response.status === 'incomplete' && reason === 'content_filter') return 'content_filter';
  if (response.status === 'incomplete') return 'length';
  const output = Array.isArray(response.output) ? (response.output as { type?: unknown }[]) : [];
  return output.some((item) => item?.type === 'function_call') ? 'tool_calls' : 'stop';
}

/** Responses usage as chat's: the reverse of usageOf, its details kept. */
export function chatUsageOf(usage: unknown): Json {
  const u = (typeof usage === 'object' && usage !== null ? usage : {}) as Partial<ResponsesUsage>;
  const input = count(u.input_tokens);
  const output = count(u.output_tokens);
  return {
    prompt_tokens: input,
    completion_tokens: output,
    total_tokens: input + output,
    prompt_tokens_details: { cached_tokens: count(u.input_tokens_details?.cached_tokens) },
    completion_tokens_details: { reasoning_tokens: count(u.output_tokens_details?.reasoning_tokens) },
  };
}

/** The Response shell: identity, the request's echoes, no output yet. Shared with the stream's first events. */
export function responseShell(call: ResponsesCall, identity: ResponseIdentity): ResponseObject {
  return {
    id: identity.id ?? newId('resp'),
    object: 'response',
    created_at: identity.createdAtS ?? Math.floor(Date.now() / 1000),
    status: 'in_progress',
    background: false,
    error: null,
    incomplete_details: null,
    ...call.echo,
    model: call.model,
    output: [],
    usage: null,
  };
}

interface ChatLogprob {
  token?: unknown;
  logprob?: unknown;
  bytes?: unknown;
  top_logprobs?: Array<{ token?: unknown; logprob?: unknown; bytes?: unknown }>;
}

/** Chat's per-token logprobs in the Responses shape (the same fields, bytes required). */
export function logprobsOf(content: readonly ChatLogprob[] | null | undefined): Json[] {
  const one = (l: { token?: unknown; logprob?: unknown; bytes?: unknown }) => ({
    token: typeof l.token === 'string' ? l.token : '',
    logprob: count(l.logprob),
    bytes: Array.isArray(l.bytes) ? l.bytes : [],
  });
  return (content ?? []).map((l) => ({ ...one(l), top_logprobs: (l.top_logprobs ?? []).map(one) }));
}

/** The reasoning text an engine gave: vLLM says `reasoning` (older: `reasoning_content`), llama.cpp `reasoning_content`. */
export function reasoningOf(m: { reasoning?: unknown; reasoning_content?: unknown } | undefined): string {
  if (typeof m?.reasoning_content === 'string') return m.reasoning_content;
  if (typeof m?.reasoning === 'string') return m.reasoning;
  return '';
}

export function reasoningItem(id: string, text: string, status: 'completed' | 'incomplete' | 'in_progress'): Json {
  return { id, type: 'reasoning', summary: [], content: [{ type: 'reasoning_text', text }], status };
}

export function messageItem(
  id: string,
  text: string,
  status: 'completed' | 'incomplete' | 'in_progress',
  logprobs?: Json[],
): Json {
  const part: Json = { type: 'output_text', text, annotations: [] };
  if (logprobs) part.logprobs = logprobs;
  return { id, type: 'message', status, role: 'assistant', content: [part] };
}

export function functionCallItem(
  id: string,
  callId: string,
  name: string,
  args: string,
  status: 'completed' | 'incomplete' | 'in_progress',
): Json {
  return { id, type: 'function_call', call_id: callId, name, arguments: args, status };
}

interface ChatCompletion {
  choices?: Array<{
    message?: {
      content?: unknown;
      reasoning?: unknown;
      reasoning_content?: unknown;
      refusal?: unknown;
      tool_calls?: Array<{ id?: unknown; function?: { name?: unknown; arguments?: unknown } }>;
    };
    finish_reason?: unknown;
    logprobs?: { content?: ChatLogprob[] | null } | null;
  }>;
  usage?: ChatUsage | null;
}

/** The whole answer. Only the first choice is translated: Responses has no `n`. */
export function toResponse(
  completion: ChatCompletion,
  call: ResponsesCall,
  identity: ResponseIdentity = {},
): ResponseObject {
  const choice = completion.choices?.[0];
  const m = choice?.message;
  const status = statusOf(choice?.finish_reason);
  const itemStatus = status.status === 'completed' ? 'completed' : 'incomplete';
  const output: Json[] = [];
  const reasoning = reasoningOf(m);
  if (reasoning !== '') output.push(reasoningItem(newId('rs'), reasoning, itemStatus));
  const text = typeof m?.content === 'string' ? m.content : '';
  if (text !== '')
    output.push(
      messageItem(
        newId('msg'),
        text,
        itemStatus,
        choice?.logprobs?.content ? logprobsOf(choice.logprobs.content) : undefined,
      ),
    );
  else if (typeof m?.refusal === 'string' && m.refusal !== '') {
    output.push({
      id: newId('msg'),
      type: 'message',
      status: itemStatus,
      role: 'assistant',
      content: [{ type: 'refusal', refusal: m.refusal }],
    });
  }
  for (const [i, tc] of (m?.tool_calls ?? []).entries()) {
    const callId = typeof tc.id === 'string' && tc.id !== '' ? tc.id : `call_${i}_${newId('fc').slice(3)}`;
    const name = typeof tc.function?.name === 'string' ? tc.function.name : '';
    const args = typeof tc.function?.arguments === 'string' ? tc.function.arguments : '{}';
    output.push(functionCallItem(newId('fc'), callId, name, args, 'completed'));
  }
  return { ...responseShell(call, identity), ...status, output, usage: usageOf(completion.usage) };
}

/**
 * The conversation after this response, for StoredResponse.items: the
 * previous response's items and this request's input (as the call holds
 * them), then this response's output items. Works for a response an engine
 * gave natively as well.
 */
export function keptItems(call: ResponsesCall, response: { output?: unknown }): unknown[] {
  return [...call.items, ...(Array.isArray(response.output) ? response.output : [])];
}
