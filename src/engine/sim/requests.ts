// Reads OpenAI request bodies into the few facts the sim acts on (prompt
// hash and size, token budget, stops, n, stream). Hand-written checks rather
// than a schema because this runs on every request of a router benchmark;
// a malformed body becomes LLMGW_BAD_REQUEST naming the field, which the
// server answers as a 400 in OpenAI's error shape.
import { LlmgwError } from '../../errors/index.js';
import { fnvStart, fnvUpdate, fnvUpdateInt, promptTokensOfText } from './generate.js';

/** One prompt as the generator needs it. */
export interface PromptFacts {
  readonly hash: number;
  readonly promptTokens: number;
  /**
   * What the simulated KV cache tokenises: the prompt's text (chat: the
   * messages' text parts joined, as promptTokens counts them), or its token
   * ids as sent.
   */
  readonly content: string | readonly number[];
}

export interface GenerationRequest {
  readonly kind: 'chat' | 'completion';
  /** Absent: the canonical model, as vLLM does. */
  readonly model: string | undefined;
  readonly stream: boolean;
  readonly includeUsage: boolean;
  /** Null: not given, so the default (16, clipped to the context left) applies. */
  readonly maxTokens: number | null;
  readonly n: number;
  readonly stops: readonly string[];
  /** Null: the engine's seed. */
  readonly seed: number | null;
  /** Chat: exactly one. Completions: one per prompt of a batch. */
  readonly prompts: readonly PromptFacts[];
  /**
   * The function the chat request forces a call to (tool_choice naming one,
   * or "required" with tools: the first listed), answered with one
   * deterministic tool call instead of text; null = answered in text (the
   * sim never chooses a tool on its own).
   */
  readonly toolCall: string | null;
}

export interface EmbeddingRequest {
  readonly model: string | undefined;
  readonly inputs: readonly PromptFacts[];
  readonly encoding: 'float' | 'base64';
  /** Null: the engine's embedding dimension. */
  readonly dimensions: number | null;
}

/** The most choices one request may ask for: the sim is for load, not for wide sampling. */
export const MAX_CHOICES = 16;
const MAX_STOPS = 4;

function bad(param: string, message: string): LlmgwError {
  return new LlmgwError('LLMGW_BAD_REQUEST', message, { context: { param } });
}

function asObject(body: unknown): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw bad('body', 'the request body must be a JSON object');
  }
  return body as Record<string, unknown>;
}

function optionalModel(o: Record<string, unknown>): string | undefined {
  const model = o.model;
  if (model === undefined || model === null) return undefined;
  if (typeof model !== 'string') throw bad('model', 'model: want a string naming a served model');
  return model;
}

function optionalPositiveInt(o: Record<string, unknown>, key: string): number | null {
  const v = o[key];
  if (v === undefined || v === null) return null;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1)
    throw bad(key, `${key}: want an integer of at least 1, got ${JSON.stringify(v)}`);
  return v;
}

function common(o: Record<string, unknown>) {
  const maxTokens = optionalPositiveInt(o, 'max_completion_tokens') ?? optionalPositiveInt(o, 'max_tokens');
  const n = optionalPositiveInt(o, 'n') ?? 1;
  if (n > MAX_CHOICES) throw bad('n', `n: the sim engine returns at most ${MAX_CHOICES} choices per request, got ${n}`);
  const stream = o.stream === true;
  if (o.stream !== undefined && o.stream !== null && typeof o.stream !== 'boolean')
    throw bad('stream', 'stream: want true or false');
  let includeUsage = false;
  const so = o.stream_options;
  if (so !== undefined && so !== null) {
    if (typeof so !== 'object' || Array.isArray(so))
      throw bad('stream_options', 'stream_options: want an object like {"include_usage": true}');
    includeUsage = (so as Record<string, unknown>).include_usage === true;
  }
  let stops: string[] = [];
  const stop = o.stop;
  if (typeof stop === 'string') stops = stop === '' ? [] : [stop];
  else if (Array.isArray(stop)) {
    if (stop.length > MAX_STOPS || stop.some((s) => typeof s !== 'string')) {
      throw bad('stop', `stop: want a string or a list of up to ${MAX_STOPS} strings`);
    }
    stops = (stop as string[]).filter((s) => s !== '');
  } else if (stop !== undefined && stop !== null) throw bad('stop', 'stop: want a string or a list of strings');
  const seedValue = o.seed;
  let seed: number | null = null;
  if (seedValue !== undefined && seedValue !== null) {
    if (typeof seedValue !== 'number' || !Number.isInteger(seedValue)) throw bad('seed', 'seed: want an integer');
    seed = seedValue;
  }
  return { model: optionalModel(o), maxTokens, n, stream, includeUsage, stops, seed };
}

/** Text of one message's content: a string, null, or a list of parts of which only text parts count. */
function contentText(content: unknown, index: number): string {
  if (typeof content === 'string') return content;
  if (content === null || content === undefined) return '';
  if (Array.isArray(content)) {
    let text = '';
    for (const part of content) {
      if (typeof part === 'object' && part !== null && typeof (part as { text?: unknown }).text === 'string') {
        text += (part as { text: string }).text;
      }
    }
    return text;
  }
  throw bad(`messages[${index}].content`, `messages[${index}].content: want a string or a list of content parts`);
}

export function parseChatRequest(body: unknown): GenerationRequest {
  const o = asObject(body);
  const messages = o.messages;
  if (!Array.isArray(messages) || messages.length === 0) {
    throw bad('messages', 'messages: is required, a non-empty list of {"role", "content"} objects');
  }
  let hash = fnvStart();
  let content = '';
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i] as unknown;
    if (typeof m !== 'object' || m === null || typeof (m as { role?: unknown }).role !== 'string') {
      throw bad(`messages[${i}]`, `messages[${i}]: want an object with a string "role"`);
    }
    const text = contentText((m as { content?: unknown }).content, i);
    hash = fnvUpdate(fnvUpdateInt(fnvUpdate(hash, (m as { role: string }).role), 0), text);
    hash = fnvUpdateInt(hash, 1);
    content += text;
  }
  return {
    kind: 'chat',
    ...common(o),
    prompts: [{ hash, promptTokens: promptTokensOfText(content.length), content }],
    toolCall: forcedTool(o),
  };
}

/** The function a chat request forces a call to (see GenerationRequest.toolCall). */
function forcedTool(o: Record<string, unknown>): string | null {
  const choice = o.tool_choice;
  if (choice === undefined || choice === null || choice === 'auto' || choice === 'none') return null;
  const tools = o.tools;
  const names = Array.isArray(tools)
    ? tools
        .map((t) => (t as { function?: { name?: unknown } } | null)?.function?.name)
        .filter((n): n is string => typeof n === 'string')
    : [];
  if (choice === 'required') {
    if (names.length === 0) throw bad('tool_choice', 'tool_choice: "required" needs at least one function in tools');
    return names[0]!;
  }
  const named = (choice as { function?: { name?: unknown } }).function?.name;
  if (typeof named !== 'string')
    throw bad(
      'tool_choice',
      'tool_choice: want "auto", "none", "required" or {"type": "function", "function": {"name"}}',
    );
  if (!names.includes(named)) throw bad('tool_choice', `tool_choice: the function \`${named}\` is not in tools`);
  return named;
}

function isTokenIds(v: unknown): v is number[] {
  return Array.isArray(v) && v.length > 0 && v.every((t) => typeof t === 'number' && Number.isInteger(t));
}

function textFacts(text: string): PromptFacts {
  return { hash: fnvUpdate(fnvStart(), text), promptTokens: promptTokensOfText(text.length), content: text };
}

function tokenFacts(ids: readonly number[]): PromptFacts {
  let hash = fnvStart();
  for (const id of ids) hash = fnvUpdateInt(hash, id);
  return { hash, promptTokens: ids.length, content: ids };
}

/** A prompt or an embedding input: a string, a list of strings, token ids, or a list of those. */
function promptList(v: unknown, param: string): PromptFacts[] {
  if (typeof v === 'string') return [textFacts(v)];
  if (isTokenIds(v)) return [tokenFacts(v)];
  if (Array.isArray(v) && v.length > 0) {
    return v.map((item, i) => {
      if (typeof item === 'string') return textFacts(item);
      if (isTokenIds(item)) return tokenFacts(item);
      throw bad(param, `${param}[${i}]: want a string or a list of token ids`);
    });
  }
  throw bad(param, `${param}: is required, a string, a list of strings, or token ids`);
}

export function parseCompletionRequest(body: unknown): GenerationRequest {
  const o = asObject(body);
  const prompts = promptList(o.prompt, 'prompt');
  const facts = common(o);
  if (prompts.length * facts.n > MAX_CHOICES * 4) {
    throw bad(
      'prompt',
      `prompt: ${prompts.length} prompts × n=${facts.n} is more choices than the sim engine returns (${MAX_CHOICES * 4})`,
    );
  }
  return { kind: 'completion', ...facts, prompts, toolCall: null };
}

export function parseEmbeddingRequest(body: unknown): EmbeddingRequest {
  const o = asObject(body);
  const inputs = promptList(o.input, 'input');
  const format = o.encoding_format;
  if (format !== undefined && format !== null && format !== 'float' && format !== 'base64') {
    throw bad('encoding_format', 'encoding_format: want "float" or "base64"');
  }
  return {
    model: optionalModel(o),
    inputs,
    encoding: format === 'base64' ? 'base64' : 'float',
    dimensions: optionalPositiveInt(o, 'dimensions'),
  };
}
