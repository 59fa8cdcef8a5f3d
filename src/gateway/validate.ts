// What the router checks before a request leaves llmgw: the shape of each
// endpoint's body (loosely: engines accept many extra fields and the router
// must not lag behind them; for the pass-through endpoints, rerank, score,
// tokenize and a transcription's form, only what routing needs), the limits
// on `n` and `max_tokens`,
// and that nothing in the body can point the request somewhere else. The
// last matters because some gateways honour `api_base`/`base_url` from the
// body; llmgw never does, and refuses such bodies so nobody believes it did.
import { z } from 'zod';
import { LlmgwError } from '../errors/index.js';
import type { Endpoint } from './endpoints.js';
import type { ReadForm } from '../http/index.js';
import { describeIssues } from '../validation/index.js';

export type { Endpoint };

/** Endpoints that generate tokens: `n` and `max_tokens` are theirs, and a stream's usage is asked for. */
const GENERATES: ReadonlySet<Endpoint> = new Set(['chat', 'completions', 'messages', 'responses']);
/** Whether an endpoint generates tokens (a completion to reserve against a token limit). */
export function generates(endpoint: Endpoint): boolean {
  return GENERATES.has(endpoint);
}

/** Endpoints whose stream the router asks for usage with stream_options (Chat Completions' and Completions' own field). */
const STREAM_USAGE: ReadonlySet<Endpoint> = new Set(['chat', 'completions', 'messages']);

export interface RequestLimits {
  /** Largest `n`. */
  readonly maxN: number;
  /** Largest `max_tokens` / `max_completion_tokens`. */
  readonly maxTokens: number;
}

const model = z.string({ error: 'want the model name as a string' }).min(1, 'want a model name');
const positiveInt = z.number({ error: 'want a whole number' }).int('want a whole number').min(1, 'want at least 1');

const generation = {
  model,
  n: positiveInt.nullish(),
  max_tokens: positiveInt.nullish(),
  max_completion_tokens: positiveInt.nullish(),
  stream: z.boolean({ error: 'want true or false' }).nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().nullish() }).nullish(),
};

const ChatSchema = z.looseObject({
  ...generation,
  messages: z
    .array(z.looseObject({ role: z.string({ error: 'want a role such as "user"' }) }), {
      error: 'want an array of messages',
    })
    .min(1, 'want at least one message'),
});

const CompletionSchema = z.looseObject({
  ...generation,
  prompt: z.union([z.string(), z.array(z.string()), z.array(z.number()), z.array(z.array(z.number()))], {
    error: 'want a string, an array of strings, or token ids',
  }),
});

const EmbeddingSchema = z.looseObject({
  model,
  input: z.union([z.string(), z.array(z.string()), z.array(z.number()), z.array(z.array(z.number()))], {
    error: 'want a string, an array of strings, or token ids',
  }),
});

/** vLLM's, llama.cpp's and SGLang's rerank body (Jina's and Cohere's shape): a query and the documents to order. */
const RerankSchema = z.looseObject({
  model,
  query: z.union([z.string().min(1, 'want the query as a non-empty string'), z.looseObject({})], {
    error: 'want the query as a string',
  }),
  documents: z.union([z.array(z.unknown()).min(1, 'want at least one document'), z.looseObject({})], {
    error: 'want a list of documents',
  }),
  top_n: positiveInt.nullish(),
});

const scoreSide = z.union([z.string(), z.array(z.unknown()), z.looseObject({})], { error: 'want a string or a list' });

/** vLLM's score body (text_1 against text_2), or SGLang's (query against items). */
const ScoreSchema = z
  .looseObject({
    model,
    text_1: scoreSide.optional(),
    text_2: scoreSide.optional(),
    query: scoreSide.optional(),
    items: scoreSide.optional(),
  })
  .refine(
    (b) => (b.text_1 !== undefined && b.text_2 !== undefined) || (b.query !== undefined && b.items !== undefined),
    {
      message: 'want text_1 and text_2 (vLLM), or query and items (SGLang)',
      path: ['text_1'],
    },
  );

/** vLLM's /tokenize (prompt, or chat messages with the model's template) and llama.cpp's (content). */
const TokenizeSchema = z
  .looseObject({
    model,
    prompt: z.string({ error: 'want the text as a string' }).optional(),
    content: z.string({ error: 'want the text as a string' }).optional(),
    messages: z
      .array(z.looseObject({ role: z.string({ error: 'want a role such as "user"' }) }), {
        error: 'want an array of messages',
      })
      .min(1, 'want at least one message')
      .optional(),
  })
  .refine((b) => b.prompt !== undefined || b.content !== undefined || b.messages !== undefined, {
    message: 'want the text as prompt (vLLM) or content (llama.cpp), or chat messages',
    path: ['prompt'],
  });

const DetokenizeSchema = z.looseObject({
  model,
  tokens: z.array(z.number().int('want whole token ids'), { error: 'want a list of token ids' }),
});

/** A transcription's form fields (the file is checked apart: it is no text field). */
const TranscriptionSchema = z.looseObject({
  model: z.string({ error: 'the form has no model field; add one naming the model' }).min(1, 'want a model name'),
});

const SCHEMAS: Record<Endpoint, z.ZodType> = {
  chat: ChatSchema,
  messages: ChatSchema,
  completions: CompletionSchema,
  embeddings: EmbeddingSchema,
  rerank: RerankSchema,
  score: ScoreSchema,
  tokenize: TokenizeSchema,
  detokenize: DetokenizeSchema,
  transcriptions: TranscriptionSchema,
  // Checked as the Chat Completions body admission translates it to (responses/request.ts checks the Responses shape).
  responses: ChatSchema,
};

export interface ParsedRequest {
  readonly body: Record<string, unknown>;
  readonly model: string;
  readonly stream: boolean;
  /** A stream whose client did not ask for `stream_options.include_usage`: the router asks for it and keeps the usage chunk back. */
  readonly usageWithheld: boolean;
  /**
   * The fewest tokens the prompt can be (see leastPromptTokens), walked once
   * on first use: the context check, the token reservation and a cut
   * stream's accounting all ask, and most requests need none of them.
   */
  leastPromptTokens(): number;
}

/**
 * Fields whose strings are the user's content, schemas or tags, where a URL
 * is ordinary text: OpenAI's (a predicted output, metadata tags) and the
 * extensions vLLM accepts (RAG documents, guided decoding, chat templates).
 */
const CONTENT_FIELDS: ReadonlySet<string> = new Set([
  'messages',
  'prompt',
  'input',
  'suffix',
  'tools',
  'functions',
  'tool_choice',
  'response_format',
  'stop',
  'logit_bias',
  'prediction',
  'metadata',
  'documents',
  'guided_json',
  'guided_regex',
  'guided_choice',
  'guided_grammar',
  'structured_outputs',
  'chat_template',
  'chat_template_kwargs',
  'mm_processor_kwargs',
  'query',
  'text_1',
  'text_2',
  'items',
  'content',
]);

/** Field names that in some gateway or SDK mean "send this request there". */
const REDIRECT_FIELDS: ReadonlySet<string> = new Set([
  'api_base',
  'base_url',
  'api_url',
  'api_host',
  'endpoint',
  'url',
  'host',
  'proxy',
  'upstream',
]);

/** scheme://…, //host…, or a bare host with a port or a path (localhost:8000, 10.0.0.1/v1); a bare address alone is an identifier. */
const URL_RE = /^\s*[a-z][a-z0-9+.-]*:\/\/|^\s*\/\/[^/]|^\s*(?:localhost|\d{1,3}(?:\.\d{1,3}){3})(?::\d+(?:\/|$)|\/)/i;

/** Parses and checks a body; throws LLMGW_BAD_REQUEST naming the field. */
export function parseRequest(endpoint: Endpoint, raw: Buffer, limits: RequestLimits): ParsedRequest {
  let json: unknown;
  try {
    json = JSON.parse(raw.toString('utf8'));
  } catch (err) {
    throw new LlmgwError('LLMGW_INVALID_JSON', `the request body is not valid JSON: ${(err as Error).message}`);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    throw new LlmgwError('LLMGW_BAD_REQUEST', 'the request body must be a JSON object');
  }
  return checked(endpoint, json as Record<string, unknown>, limits);
}

/**
 * Checks a transcription's form: a `model` field and a `file` (a form
 * without either is refused, saying so); its text fields are the body the
 * router reads (`stream`, `response_format`), its bytes go on as sent.
 */
export function parseFormRequest(endpoint: Endpoint, form: ReadForm, limits: RequestLimits): ParsedRequest {
  if (!form.files.has('file')) {
    const named = [...form.files.keys()];
    throw new LlmgwError(
      'LLMGW_BAD_REQUEST',
      `the form has no file field; send the audio as a file part named "file"${named.length ? ` (it has ${named.map((n) => `"${n.slice(0, 40)}"`).join(', ')})` : ''}`,
      { context: { param: 'file' } },
    );
  }
  const body: Record<string, unknown> = { ...form.fields };
  // A form's values are text: `stream=true` is a stream, as vLLM reads it.
  if (typeof body.stream === 'string') body.stream = body.stream === 'true';
  return checked(endpoint, body, limits);
}

function checked(endpoint: Endpoint, body: Record<string, unknown>, limits: RequestLimits): ParsedRequest {
  const schema = SCHEMAS[endpoint];
  const parsed = schema.safeParse(body);
  if (!parsed.success) {
    const problems = describeIssues(schema, parsed.error);
    throw new LlmgwError('LLMGW_BAD_REQUEST', problems.join('; '), { context: { param: firstPath(parsed.error) } });
  }
  refuseRedirects(body);
  if (GENERATES.has(endpoint)) {
    const n = body.n;
    if (typeof n === 'number' && n > limits.maxN) {
      throw new LlmgwError(
        'LLMGW_BAD_REQUEST',
        `n: ${n} is more than this server allows (${limits.maxN}); ask for fewer choices`,
        { context: { param: 'n' } },
      );
    }
    for (const field of ['max_tokens', 'max_completion_tokens'] as const) {
      const v = body[field];
      if (typeof v === 'number' && v > limits.maxTokens) {
        throw new LlmgwError(
          'LLMGW_BAD_REQUEST',
          `${field}: ${v} is more than this server allows (${limits.maxTokens})`,
          { context: { param: field } },
        );
      }
    }
  }
  const stream = body.stream === true;
  const usageAsked = (body.stream_options as { include_usage?: unknown } | null | undefined)?.include_usage === true;
  let least: number | undefined;
  return {
    body,
    model: body.model as string,
    stream,
    usageWithheld: stream && !usageAsked && STREAM_USAGE.has(endpoint),
    leastPromptTokens: () => (least ??= leastPromptTokens(endpoint, body)),
  };
}

/** A model's own limits, from its catalog entry; null = not declared. */
export interface ModelLimits {
  readonly contextTokens: number | null;
  readonly maxTokens: number | null;
  readonly maxN: number | null;
}

/**
 * The least number of tokens a prompt of this many UTF-8 bytes can be. No
 * tokenizer in use packs more than a few bytes into a token on average over
 * a prompt (English is about 4); 16 leaves room for whitespace-heavy code, so
 * a prompt refused on this count could not have fitted.
 */
export const BYTES_PER_TOKEN_AT_MOST = 16;

/**
 * The checks that need the model: `n` and `max_tokens` within its declared
 * limits, and a prompt that cannot fit its context. Throws LLMGW_BAD_REQUEST
 * naming the field, before any engine sees the request.
 */
export function checkModelLimits(
  endpoint: Endpoint,
  parsed: ParsedRequest,
  modelName: string,
  limits: ModelLimits,
): void {
  const body = parsed.body;
  const refuse = (param: string, message: string): never => {
    throw new LlmgwError('LLMGW_BAD_REQUEST', message, { context: { param } });
  };
  const tooLong = (param: string, message: string): never => {
    throw new LlmgwError('LLMGW_CONTEXT_LENGTH_EXCEEDED', message, { context: { param } });
  };
  if (GENERATES.has(endpoint)) {
    if (limits.maxN !== null && typeof body.n === 'number' && body.n > limits.maxN) {
      refuse('n', `n: ${body.n} is more than model \`${modelName}\` allows (${limits.maxN})`);
    }
    for (const field of ['max_tokens', 'max_completion_tokens'] as const) {
      const v = body[field];
      if (typeof v !== 'number') continue;
      if (limits.maxTokens !== null && v > limits.maxTokens)
        refuse(field, `${field}: ${v} is more than model \`${modelName}\` allows (${limits.maxTokens})`);
      if (limits.contextTokens !== null && v >= limits.contextTokens) {
        tooLong(
          field,
          `This model's maximum context length is ${limits.contextTokens} tokens, and ${field} asks for ${v}, which leaves no room for any prompt; ask for fewer tokens (model \`${modelName}\`)`,
        );
      }
    }
  }
  const field = promptField(endpoint);
  // Rerank and score send each pair as its own sequence, tokenize and audio generate nothing: no prompt to fit.
  if (limits.contextTokens === null || field === null) return;
  const least = parsed.leastPromptTokens();
  const asked = GENERATES.has(endpoint) ? Number(body.max_tokens ?? body.max_completion_tokens ?? 0) : 0;
  if (least + asked > limits.contextTokens) {
    // OpenAI's words: clients and frameworks recognise an overflow by them (and by the code) to trim the history.
    tooLong(
      field,
      `This model's maximum context length is ${limits.contextTokens} tokens. However, you requested at least ${least + asked} tokens ` +
        `(at least ${least} in the ${field}${asked ? `, ${asked} for the completion` : ''}); send a shorter prompt${asked ? ' or ask for fewer tokens' : ''} (model \`${modelName}\`)`,
    );
  }
}

/** The field an endpoint's prompt is in, as one sequence the context must hold; null = none does. */
function promptField(endpoint: Endpoint): 'messages' | 'prompt' | 'input' | null {
  switch (endpoint) {
    case 'chat':
    case 'messages':
    case 'responses':
      return 'messages';
    case 'completions':
      return 'prompt';
    case 'embeddings':
      return 'input';
    default:
      return null;
  }
}

/** Where each endpoint's text is, for the least tokens it can be; an endpoint not listed has none that counts. */
const TEXT_FIELDS: Partial<Record<Endpoint, readonly string[]>> = {
  rerank: ['query', 'documents'],
  score: ['text_1', 'text_2', 'query', 'items'],
};

/** The fewest tokens a request's prompt can be (its messages, prompt or input; rerank's query and documents): see leastTokens. */
export function leastPromptTokens(endpoint: Endpoint, body: Record<string, unknown>): number {
  const field = promptField(endpoint);
  if (field !== null) return leastTokens(body[field]);
  return (TEXT_FIELDS[endpoint] ?? []).reduce((sum, f) => sum + leastTokens(body[f]), 0);
}

/** A lower bound on the tokens in a prompt: token ids counted exactly, text by BYTES_PER_TOKEN_AT_MOST. */
function leastTokens(value: unknown): number {
  let tokens = 0;
  let bytes = 0;
  const walk = (v: unknown, depth: number): void => {
    if (depth > 8) return;
    if (typeof v === 'string') bytes += Buffer.byteLength(v);
    else if (typeof v === 'number') tokens++;
    else if (Array.isArray(v)) for (const x of v) walk(x, depth + 1);
    else if (v && typeof v === 'object') {
      const o = v as Record<string, unknown>;
      // Chat messages: their text is in content (a string, or parts with text).
      if ('content' in o) walk(o.content, depth + 1);
      else if (typeof o.text === 'string') bytes += Buffer.byteLength(o.text);
    }
  };
  walk(value, 0);
  return tokens + Math.floor(bytes / BYTES_PER_TOKEN_AT_MOST);
}

function firstPath(error: z.ZodError): string | null {
  const p = error.issues[0]?.path;
  return p && p.length ? String(p[0]) : null;
}

/**
 * 400 for a redirecting field name at the top (or in `extra_body`, where
 * some SDKs and gateways take them), or a URL-looking string anywhere
 * outside the content fields. A nested key named `endpoint` or `host` whose
 * value is no URL is data, not a destination.
 */
function refuseRedirects(body: Record<string, unknown>): void {
  const refuseName = (name: string, path: string, param: string) => {
    if (REDIRECT_FIELDS.has(name.toLowerCase())) {
      throw new LlmgwError('LLMGW_BAD_REQUEST', `${path}: llmgw chooses where a request goes; remove this field`, {
        context: { param },
      });
    }
  };
  for (const [key, value] of Object.entries(body)) {
    refuseName(key, key, key);
    if (key === 'extra_body' && value !== null && typeof value === 'object' && !Array.isArray(value)) {
      for (const inner of Object.keys(value)) refuseName(inner, `extra_body.${inner}`, key);
    }
    if (CONTENT_FIELDS.has(key)) continue;
    const where = findUrl(value, key, 0);
    if (where) {
      throw new LlmgwError(
        'LLMGW_BAD_REQUEST',
        `${where}: a URL is not accepted here, because no field may redirect the request; remove it`,
        {
          context: { param: key },
        },
      );
    }
  }
}

/** The path of the first URL-looking string under `value`; depth-bounded. */
function findUrl(value: unknown, path: string, depth: number): string | null {
  if (typeof value === 'string') return URL_RE.test(value) ? path : null;
  if (depth > 8 || value === null || typeof value !== 'object') return null;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const hit = findUrl(value[i], `${path}[${i}]`, depth + 1);
      if (hit) return hit;
    }
    return null;
  }
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    const hit = findUrl(v, `${path}.${k}`, depth + 1);
    if (hit) return hit;
  }
  return null;
}

/**
 * The text a prefix cache would share: the messages' contents in order (or
 * the prompt), cut at `chars`. Engines cache by token prefix, so the start of
 * the conversation (system prompt, shared few-shot examples) is what counts.
 */
export function promptPrefix(body: Record<string, unknown>, chars: number): string {
  let out = '';
  const messages = body.messages;
  if (Array.isArray(messages)) {
    for (const m of messages) {
      const content = (m as { content?: unknown }).content;
      if (typeof content === 'string') out += content;
      else if (Array.isArray(content))
        for (const part of content)
          if (typeof (part as { text?: unknown }).text === 'string') out += (part as { text: string }).text;
      if (out.length >= chars) break;
      out += '\n';
    }
  } else {
    const prompt = body.prompt;
    if (typeof prompt === 'string') out = prompt;
    else if (Array.isArray(prompt) && typeof prompt[0] === 'string') out = prompt[0];
    else if (Array.isArray(prompt)) out = JSON.stringify(prompt.slice(0, chars));
  }
  return out.slice(0, chars);
}
