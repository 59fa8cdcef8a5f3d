// The dialect contract's table: one row per API dialect the gateway speaks,
// saying how a client of that dialect asks (path, key, body) and how it reads
// what comes back (an error body, a whole answer's usage, a stream that broke).
// contract.test.ts runs every row through the same checks, over HTTP only, so
// the table outlives any change to how the gateway is built inside. A new
// dialect adds a row here (and, when its errors or streams are shaped anew,
// the readers it needs). Kept apart from the test so the test stays about
// behaviour and this file about dialects.

/** The refusals every dialect must give in its own shape. */
export const ERROR_STATUSES = [401, 403, 404, 413, 429, 502, 503, 504] as const;
export type ErrorStatus = (typeof ERROR_STATUSES)[number];

/** An error answer as a client of the dialect reads it; a reader throws when the body is not in the dialect's shape. */
export interface ReadError {
  readonly status: number;
  readonly type: string;
  readonly message: string;
}

/** A stream as its client read it: the text it was given, and the message of the error event that ended it (null = none did). */
export interface StreamEnd {
  readonly text: string;
  readonly error: string | null;
}

/** A check of the suite a row cannot pass today, with the difference said: run as `it.fails` until the gateway meets it. */
export type ContractCheck = 'brokenStream';

export interface DialectCase {
  readonly name: string;
  readonly path: string;
  /** The endpoint a usage record names for this dialect. */
  readonly endpoint: string;
  /** What the replicas' engine is called for this row (whether it serves the dialect natively); absent = unknown. */
  readonly engine?: string;
  /** The headers that carry a key as this dialect's clients send one; null = no key. */
  auth(secret: string | null): Record<string, string>;
  /** A request for `model` that generates at most `maxTokens`, answered whole or as a stream. */
  whole(model: string, maxTokens: number): Record<string, unknown>;
  stream(model: string, maxTokens: number): Record<string, unknown>;
  /** The error type this dialect's clients read for each status. */
  readonly errorTypes: Readonly<Record<ErrorStatus, string>>;
  readError(status: number, headers: Headers, body: string): ReadError;
  /** The engine's token counts as a whole answer reports them. */
  usage(answer: unknown): { promptTokens: number; completionTokens: number };
  readStream(body: string): StreamEnd;
  /** What an engine of this row writes (two pieces of text, "one" and " two") before its connection breaks. */
  brokenUpstream(): string[];
  readonly knownGaps?: Partial<Record<ContractCheck, string>>;
}

const PROMPT = 'Tell me about rivers.';

interface SseEvent {
  readonly event: string | null;
  readonly data: string;
}

function sseEvents(body: string): SseEvent[] {
  const out: SseEvent[] = [];
  for (const block of body.split(/\r?\n\r?\n/)) {
    let event: string | null = null;
    const data: string[] = [];
    for (const line of block.split(/\r?\n/)) {
      if (line.startsWith('event:')) event = line.slice(6).trim();
      else if (line.startsWith('data:')) data.push(line.slice(5).trimStart());
    }
    if (event !== null || data.length) out.push({ event, data: data.join('\n') });
  }
  return out;
}

function json(text: string, what: string): Record<string, unknown> {
  try {
    const v = JSON.parse(text) as unknown;
    if (typeof v === 'object' && v !== null) return v as Record<string, unknown>;
  } catch {
    // Said below with the text.
  }
  throw new Error(`${what} is not a JSON object: ${text.slice(0, 200)}`);
}

function record(v: unknown): Record<string, unknown> {
  return typeof v === 'object' && v !== null ? (v as Record<string, unknown>) : {};
}

function str(v: unknown, what: string): string {
  if (typeof v !== 'string') throw new Error(`${what} is not a string: ${JSON.stringify(v)}`);
  return v;
}

// ---- OpenAI's shapes (Chat Completions, Completions, and Responses' errors) --

const OPENAI_ERROR_TYPES: Record<ErrorStatus, string> = {
  401: 'authentication_error',
  403: 'permission_error',
  404: 'invalid_request_error',
  413: 'invalid_request_error',
  429: 'rate_limit_error',
  502: 'server_error',
  503: 'server_error',
  504: 'server_error',
};

/** `{"error":{"message","type","param","code"}}`, which the openai SDKs parse. */
function readOpenAiError(status: number, _headers: Headers, body: string): ReadError {
  const error = record(json(body, `the ${status} body`).error);
  if (!('param' in error) || !('code' in error)) throw new Error(`not OpenAI's error object: ${body.slice(0, 200)}`);
  return { status, type: str(error.type, 'error.type'), message: str(error.message, 'error.message') };
}

const bearer = (secret: string | null): Record<string, string> =>
  secret === null ? {} : { authorization: `Bearer ${secret}` };

/** An OpenAI stream: the text of its chunks, and the error object of a last `data:` line that carries one. */
function readOpenAiStream(body: string, textOf: (choice: Record<string, unknown>) => unknown): StreamEnd {
  const events = sseEvents(body).filter((e) => e.data !== '[DONE]');
  let text = '';
  for (const e of events) {
    const choice = record((json(e.data, 'a stream event').choices as unknown[] | undefined)?.[0] ?? null);
    const piece = textOf(choice);
    if (typeof piece === 'string') text += piece;
  }
  const last = events.at(-1);
  const error = last ? record(json(last.data, 'the last event').error) : {};
  return { text, error: typeof error.message === 'string' ? error.message : null };
}

const chatChunk = (delta: Record<string, unknown>) =>
  `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 0, model: 'alpha', choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`;
const chatBreak = () => [chatChunk({ role: 'assistant', content: 'one' }), chatChunk({ content: ' two' })];

const completionChunk = (text: string) =>
  `data: ${JSON.stringify({ id: 'c', object: 'text_completion', created: 0, model: 'alpha', choices: [{ index: 0, text, finish_reason: null }] })}\n\n`;

const openAiUsage = (answer: unknown) => {
  const u = record(record(answer).usage);
  return { promptTokens: Number(u.prompt_tokens), completionTokens: Number(u.completion_tokens) };
};

// ---- Anthropic's Messages --------------------------------------------------

/** `{"type":"error","error":{"type","message"}}` and a `request-id` header, which Anthropic's SDKs read. */
function readAnthropicError(status: number, headers: Headers, body: string): ReadError {
  const parsed = json(body, `the ${status} body`);
  if (parsed.type !== 'error') throw new Error(`not Anthropic's error: ${body.slice(0, 200)}`);
  if (!headers.get('request-id')) throw new Error(`the ${status} answer has no request-id header`);
  const error = record(parsed.error);
  return { status, type: str(error.type, 'error.type'), message: str(error.message, 'error.message') };
}

/** Its text deltas, and the message of a last `event: error`. */
function readAnthropicStream(body: string): StreamEnd {
  const events = sseEvents(body);
  let text = '';
  for (const e of events) {
    if (e.event !== 'content_block_delta') continue;
    const delta = record(json(e.data, 'a delta').delta);
    if (delta.type === 'text_delta' && typeof delta.text === 'string') text += delta.text;
  }
  const last = events.at(-1);
  const error = last?.event === 'error' ? record(json(last.data, 'the error event').error) : {};
  return { text, error: typeof error.message === 'string' ? error.message : null };
}

// ---- OpenAI's Responses ----------------------------------------------------

/** Its text deltas, and how it ended: `response.failed` (the response's error) or `error` (the event's message). */
function readResponsesStream(body: string): StreamEnd {
  const events = sseEvents(body);
  let text = '';
  for (const e of events) {
    if (e.event !== 'response.output_text.delta') continue;
    const delta = json(e.data, 'a delta').delta;
    if (typeof delta === 'string') text += delta;
  }
  const last = events.at(-1);
  let error: unknown = null;
  if (last?.event === 'response.failed') error = record(record(json(last.data, 'response.failed').response).error);
  if (last?.event === 'error') error = json(last.data, 'the error event');
  const message = record(error).message;
  return { text, error: typeof message === 'string' ? message : null };
}

const responsesEvent = (type: string, fields: Record<string, unknown>) =>
  `event: ${type}\ndata: ${JSON.stringify({ type, ...fields })}\n\n`;
const responsesDelta = (n: number, delta: string) =>
  responsesEvent('response.output_text.delta', {
    sequence_number: n,
    item_id: 'msg_1',
    output_index: 0,
    content_index: 0,
    delta,
  });

const responsesUsage = (answer: unknown) => {
  const u = record(record(answer).usage);
  return { promptTokens: Number(u.input_tokens), completionTokens: Number(u.output_tokens) };
};

const responses = {
  path: '/v1/responses',
  endpoint: 'responses',
  auth: bearer,
  whole: (model: string, maxTokens: number) => ({ model, input: PROMPT, max_output_tokens: maxTokens }),
  stream: (model: string, maxTokens: number) => ({ model, input: PROMPT, max_output_tokens: maxTokens, stream: true }),
  errorTypes: OPENAI_ERROR_TYPES,
  readError: readOpenAiError,
  usage: responsesUsage,
  readStream: readResponsesStream,
};

export const DIALECTS: readonly DialectCase[] = [
  {
    name: 'OpenAI chat completions',
    path: '/v1/chat/completions',
    endpoint: 'chat',
    auth: bearer,
    whole: (model, maxTokens) => ({ model, messages: [{ role: 'user', content: PROMPT }], max_tokens: maxTokens }),
    stream: (model, maxTokens) => ({
      model,
      messages: [{ role: 'user', content: PROMPT }],
      max_tokens: maxTokens,
      stream: true,
    }),
    errorTypes: OPENAI_ERROR_TYPES,
    readError: readOpenAiError,
    usage: openAiUsage,
    readStream: (body) => readOpenAiStream(body, (c) => record(c.delta).content),
    brokenUpstream: chatBreak,
  },
  {
    name: 'OpenAI completions',
    path: '/v1/completions',
    endpoint: 'completions',
    auth: bearer,
    whole: (model, maxTokens) => ({ model, prompt: PROMPT, max_tokens: maxTokens }),
    stream: (model, maxTokens) => ({ model, prompt: PROMPT, max_tokens: maxTokens, stream: true }),
    errorTypes: OPENAI_ERROR_TYPES,
    readError: readOpenAiError,
    usage: openAiUsage,
    readStream: (body) => readOpenAiStream(body, (c) => c.text),
    brokenUpstream: () => [completionChunk('one'), completionChunk(' two')],
  },
  {
    name: 'Anthropic messages',
    path: '/v1/messages',
    endpoint: 'messages',
    auth: (secret) => ({ 'anthropic-version': '2023-06-01', ...(secret === null ? {} : { 'x-api-key': secret }) }),
    whole: (model, maxTokens) => ({ model, max_tokens: maxTokens, messages: [{ role: 'user', content: PROMPT }] }),
    stream: (model, maxTokens) => ({
      model,
      max_tokens: maxTokens,
      messages: [{ role: 'user', content: PROMPT }],
      stream: true,
    }),
    errorTypes: {
      401: 'authentication_error',
      403: 'permission_error',
      404: 'not_found_error',
      413: 'request_too_large',
      429: 'rate_limit_error',
      502: 'api_error',
      503: 'overloaded_error',
      504: 'api_error',
    },
    readError: readAnthropicError,
    usage: (answer) => {
      const u = record(record(answer).usage);
      return { promptTokens: Number(u.input_tokens), completionTokens: Number(u.output_tokens) };
    },
    readStream: readAnthropicStream,
    brokenUpstream: chatBreak,
  },
  {
    // An engine that does not serve the Responses API: the gateway speaks chat to it and translates.
    name: 'OpenAI responses, translated to chat',
    ...responses,
    brokenUpstream: chatBreak,
  },
  {
    // The sim serves the Responses API itself, as vLLM does: the gateway relays its events.
    name: 'OpenAI responses, served natively',
    ...responses,
    engine: 'sim',
    brokenUpstream: () => [
      responsesEvent('response.created', {
        sequence_number: 0,
        response: { id: 'resp_engine_own_id', object: 'response', status: 'in_progress', output: [] },
      }),
      responsesDelta(1, 'one') + responsesDelta(2, ' two'),
    ],
  },
];
