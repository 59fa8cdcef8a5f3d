// What the router checks before a request leaves llmgw: the body parses and
// has its endpoint's shape (body-schemas.ts), `n` and `max_tokens` are
// within this server's limits and then the model's, the prompt can fit the
// model's context, and nothing in the body redirects the request
// (redirects.ts). This file runs the checks in that order and is what
// admission calls; the tables and estimates they use live beside it.
import type { z } from 'zod';
import { LlmgwError } from '../../errors/index.js';
import type { Endpoint } from '../ports/endpoints.js';
import type { ReadForm } from '../../http/index.js';
import { describeIssues } from '../../validation/index.js';
import { BODY_SCHEMAS } from './body-schemas.js';
import { PLAIN_BODY } from './body-fast-path.js';
import { refuseRedirects } from './redirects.js';
import { leastPromptTokens, promptField } from './prompt-text.js';

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

export interface ParsedRequest {
  readonly body: Record<string, unknown>;
  readonly model: string;
  readonly stream: boolean;
  /** A stream whose client did not ask for `stream_options.include_usage`: the router asks for it and keeps the usage chunk back. */
  readonly usageWithheld: boolean;
  /**
   * The fewest tokens the prompt can be (prompt-text.ts), walked once
   * on first use: the context check, the token reservation and a cut
   * stream's accounting all ask, and most requests need none of them.
   */
  leastPromptTokens(): number;
}

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
  // The schema runs only for a body the plain check does not vouch for (body-fast-path.ts): the refusals are its own.
  if (PLAIN_BODY[endpoint]?.(body) !== true) {
    const schema = BODY_SCHEMAS[endpoint];
    const parsed = schema.safeParse(body);
    if (!parsed.success) {
      const problems = describeIssues(schema, parsed.error);
      throw new LlmgwError('LLMGW_BAD_REQUEST', problems.join('; '), { context: { param: firstPath(parsed.error) } });
    }
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

function firstPath(error: z.ZodError): string | null {
  const p = error.issues[0]?.path;
  return p && p.length ? String(p[0]) : null;
}
