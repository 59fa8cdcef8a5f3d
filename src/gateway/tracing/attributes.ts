// The names a request's spans carry: OpenTelemetry's GenAI semantic
// conventions where they have one (copied here, as OpenTelemetry advises for
// names still incubating, and checked against the package by
// attributes.test.ts), `llmgw.*` for what only a gateway in front of a fleet
// knows (the replica, its nodes, the candidates and their scores). And the
// pure readings of a request and an answer that fill them: kept apart from
// the span code so they are table-tested without a tracer.
import type { Endpoint } from '../ports/endpoints.js';

export const ATTR = Object.freeze({
  operationName: 'gen_ai.operation.name',
  requestModel: 'gen_ai.request.model',
  requestMaxTokens: 'gen_ai.request.max_tokens',
  requestStream: 'gen_ai.request.stream',
  responseModel: 'gen_ai.response.model',
  responseId: 'gen_ai.response.id',
  finishReasons: 'gen_ai.response.finish_reasons',
  timeToFirstChunk: 'gen_ai.response.time_to_first_chunk',
  inputTokens: 'gen_ai.usage.input_tokens',
  outputTokens: 'gen_ai.usage.output_tokens',
  inputMessages: 'gen_ai.input.messages',
  outputMessages: 'gen_ai.output.messages',
  serverAddress: 'server.address',
  serverPort: 'server.port',
  errorType: 'error.type',
  httpStatus: 'http.response.status_code',
  requestId: 'llmgw.request.id',
  endpoint: 'llmgw.endpoint',
  fallback: 'llmgw.fallback',
  attempts: 'llmgw.attempts',
  heldMs: 'llmgw.cold.held_ms',
  holdEnd: 'llmgw.cold.end',
  replica: 'llmgw.replica.id',
  nodes: 'llmgw.replica.nodes',
  engine: 'llmgw.replica.engine',
  attempt: 'llmgw.attempt.number',
  reason: 'llmgw.attempt.reason',
  pickRule: 'llmgw.choice.rule',
  candidates: 'llmgw.choice.candidates',
  scores: 'llmgw.choice.scores',
  ringOwner: 'llmgw.choice.ring_owner',
  events: 'llmgw.stream.events',
});

/** The GenAI operation of each endpoint (gen_ai.operation.name's well-known values, and llmgw's own for the rest). */
export const OPERATION: Readonly<Record<Endpoint, string>> = Object.freeze({
  chat: 'chat',
  messages: 'chat',
  responses: 'chat',
  completions: 'text_completion',
  embeddings: 'embeddings',
  rerank: 'rerank',
  score: 'score',
  transcriptions: 'transcription',
  tokenize: 'tokenize',
  detokenize: 'detokenize',
});

/**
 * The token cap a body asks for (max_tokens, max_completion_tokens, or the
 * Responses API's max_output_tokens); undefined = none set.
 */
export function requestedMaxTokens(body: Readonly<Record<string, unknown>>): number | undefined {
  for (const name of ['max_tokens', 'max_completion_tokens', 'max_output_tokens']) {
    const v = body[name];
    if (typeof v === 'number' && Number.isFinite(v)) return v;
  }
  return undefined;
}

/** What the end of an answer says of itself: the model that wrote it, its id, why each choice stopped. */
export interface AnswerFacts {
  /** In the order they appear; empty = none found (the tail holds none, or the answer was not a generation). */
  finishReasons: string[];
  /** undefined = not found. */
  model?: string;
  id?: string;
}

/**
 * Reads `tail` (the last few KiB of an answer, as the relay keeps them) for
 * finish reasons (OpenAI's finish_reason, Anthropic's stop_reason, a null
 * one skipped), and the last `"model"` and `"id"`. JSON keys inside
 * generated text are escaped, so a bare match is the engine's own field.
 */
export function answerFacts(tail: string): AnswerFacts {
  const finishReasons: string[] = [];
  for (const m of tail.matchAll(/"(?:finish_reason|stop_reason)"\s*:\s*"([^"\\]{1,64})"/g)) finishReasons.push(m[1]!);
  const facts: AnswerFacts = { finishReasons };
  const model = lastMatch(tail, /"model"\s*:\s*"([^"\\]{1,256})"/g);
  if (model !== undefined) facts.model = model;
  const id = lastMatch(tail, /"id"\s*:\s*"([^"\\]{1,256})"/g);
  if (id !== undefined) facts.id = id;
  return facts;
}

function lastMatch(text: string, re: RegExp): string | undefined {
  let last: string | undefined;
  for (const m of text.matchAll(re)) last = m[1];
  return last;
}

/**
 * The prompt as gen_ai.input.messages records it, when trace_content is on:
 * the body's `messages`, or its `prompt`/`input` as one user message, as
 * JSON. undefined = the body has none of them (an upload).
 */
export function inputMessages(body: Readonly<Record<string, unknown>>): string | undefined {
  if (Array.isArray(body.messages)) return JSON.stringify(body.messages);
  const text = body.prompt ?? body.input;
  if (text === undefined) return undefined;
  return JSON.stringify([{ role: 'user', content: text }]);
}

/**
 * A whole (not streamed) answer's messages, when trace_content is on and the
 * answer fits in the relay's tail: its choices' `message`s, as JSON.
 * undefined = not a whole Chat Completions answer, or cut off (a stream's
 * text is never reassembled for a span).
 */
export function outputMessages(whole: string): string | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(whole);
  } catch {
    return undefined;
  }
  const choices = (parsed as { choices?: unknown }).choices;
  if (!Array.isArray(choices)) return undefined;
  const messages = choices
    .map((c: unknown) => (c as { message?: unknown; text?: unknown }).message ?? (c as { text?: unknown }).text)
    .filter((m) => m !== undefined);
  return messages.length ? JSON.stringify(messages) : undefined;
}

/** An endpoint URL's host and port for server.address/server.port; null for one that is not a URL. */
export function hostPort(endpoint: string): { host: string; port: number } | null {
  try {
    const u = new URL(endpoint);
    const port = u.port ? Number(u.port) : u.protocol === 'https:' ? 443 : 80;
    return { host: u.hostname.replace(/^\[(.*)\]$/, '$1'), port };
  } catch {
    return null;
  }
}
