// What a prompt's text amounts to, read without a tokenizer: the fewest
// tokens it can be (the context check, the rate limit's reservation and a
// cut stream's accounting act on it), the most it can be (what a hard
// budget holds), and the prefix an engine's cache would share
// (prefix-affine routing hashes it). Separate from validate.ts because
// none of them refuses anything: all are estimates that others act on.
import type { Endpoint } from '../ports/endpoints.js';

/**
 * The least number of tokens a prompt of this many UTF-8 bytes can be. No
 * tokenizer in use packs more than a few bytes into a token on average over
 * a prompt (English is about 4); 16 leaves room for whitespace-heavy code, so
 * a prompt refused on this count could not have fitted.
 */
export const BYTES_PER_TOKEN_AT_MOST = 16;

/** The field an endpoint's prompt is in, as one sequence the context must hold; null = none does. */
export function promptField(endpoint: Endpoint): 'messages' | 'prompt' | 'input' | null {
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

/*
 * The most tokens a prompt can be, for what a hard budget holds: a budget is
 * overshot by at most one lease only if no request spends more than it held,
 * and a lower bound of the prompt (above) lets each request in flight at a
 * budget's edge spend past its hold. The reasoning: byte-level BPE (GPT-2,
 * Llama 3, Qwen, Mistral's Tekken) and SentencePiece with byte fallback
 * (Llama 2, Mistral's v1-v3, Gemma) turn every UTF-8 byte into at most one
 * token, whatever merges follow, so a string's bytes bound its tokens. A
 * chat template renders each message's strings (contents, text parts, names,
 * tool calls) between role markers, the tools' definitions as JSON, and text
 * of its own; each of those gets an allowance below. A tokenizer without
 * byte fallback maps an unknown character to one <unk>: fewer, never more.
 * Not bounded, because the gateway cannot see them before the engine does:
 * a request's own `chat_template` (which may render the messages twice),
 * images or audio bigger than MEDIA_PART_TOKENS, and transcriptions' audio;
 * such a request can spend past its hold by the difference.
 */

/** The template's own text once per request: the generation prompt, a default system prompt (Qwen2.5's "You are Qwen, created by Alibaba Cloud…", Llama 3.1's knowledge and today's date lines), BOS: about 30 tokens in the templates we know; 64 for the rest. */
export const TEMPLATE_TOKENS = 64;
/** Per message: its role's markers and separators (`<|im_start|>user\n` … `<|im_end|>\n` is 5; Llama 3's header is 5). */
export const MESSAGE_TOKENS = 16;
/** Per tool call in a message: the template's wrapping (Qwen's `<tool_call>\n{"name": …, "arguments": …}\n</tool_call>`). */
export const TOOL_CALL_TOKENS = 32;
/** Once for a request with tools: the template's text introducing them (Llama 3.1's and Qwen2.5's are about 100 to 150 tokens). */
export const TOOLS_PREAMBLE_TOKENS = 512;
/**
 * An image, audio or video part, whatever its bytes (base64 says nothing of
 * its tokens): Qwen2.5-VL's most for one image (its max_pixels of 12,845,056
 * over 28 × 28 patches). A model that makes more of one part is under-held
 * by the difference.
 */
export const MEDIA_PART_TOKENS = 16_384;
/** Per separately tokenized input (a completions prompt, an embeddings input, a rerank or score pair): BOS, EOS, SEP. */
export const INPUT_SPECIAL_TOKENS = 4;
/**
 * Per JSON structural character (`{ } [ ] , :`) of a tool's definition or a
 * call's arguments, which a template may re-serialize pretty-printed: a
 * space after it, a newline and an indentation run (split in two at most).
 */
const JSON_STRUCTURE_TOKENS = 4;

/** Part types (OpenAI's, Anthropic's translated, vLLM's) whose tokens are the model's encoder's, not their bytes'. */
const MEDIA_PARTS: ReadonlySet<string> = new Set([
  'image_url',
  'input_image',
  'image',
  'input_audio',
  'audio_url',
  'audio',
  'video_url',
  'video',
  'image_embeds',
]);

/**
 * An upper bound on the prompt tokens an engine can count for this request
 * (see above), 0 for one whose prompt is not charged (tokenize, detokenize)
 * or cannot be seen (transcriptions). Anthropic's Messages and the Responses
 * API reach here as the chat body they were translated to, their system
 * prompt and instructions a system message among the messages.
 */
export function mostPromptTokens(endpoint: Endpoint, body: Record<string, unknown>): number {
  switch (endpoint) {
    case 'chat':
    case 'messages':
    case 'responses':
      return chatTokens(body);
    case 'completions':
      return inputsTokens(body.prompt) + mostTokens(body.suffix);
    case 'embeddings':
      // vLLM embeds a chat too: its messages rendered through the template.
      return inputsTokens(body.input) + (Array.isArray(body.messages) ? chatTokens(body) : 0);
    case 'rerank':
      return pairsTokens([body.query], asList(body.documents));
    case 'score':
      return body.text_1 !== undefined || body.text_2 !== undefined
        ? pairsTokens(asList(body.text_1), asList(body.text_2))
        : pairsTokens(asList(body.query), asList(body.items));
    default:
      return 0;
  }
}

/** A chat through its template: the template's text, each message with its markers, the tools' definitions. */
function chatTokens(body: Record<string, unknown>): number {
  let tokens = TEMPLATE_TOKENS;
  const messages = Array.isArray(body.messages) ? body.messages : [];
  for (const m of messages) tokens += MESSAGE_TOKENS + mostTokens(m);
  tokens += toolsTokens(body.tools) + toolsTokens(body.functions);
  // vLLM's extensions a template renders too: RAG documents, and the values of its keyword arguments.
  if (body.documents !== undefined) tokens += jsonTokens(body.documents);
  if (body.chat_template_kwargs !== undefined) tokens += jsonTokens(body.chat_template_kwargs);
  // A request's own template is text the engine renders; what its loops repeat is not bounded here (see above).
  if (typeof body.chat_template === 'string') tokens += Buffer.byteLength(body.chat_template);
  // Dialect bodies not translated to chat (none today) keep their system prompt beside the messages.
  return tokens + mostTokens(body.system) + mostTokens(body.instructions);
}

/** Tool definitions (`tools`, or the older `functions`) as a template renders them; 0 for none. */
function toolsTokens(tools: unknown): number {
  return Array.isArray(tools) && tools.length > 0 ? TOOLS_PREAMBLE_TOKENS + jsonTokens(tools) : 0;
}

/** Inputs tokenized one by one (a string, strings, token ids, lists of token ids): each with its special tokens. */
function inputsTokens(value: unknown): number {
  if (value === undefined || value === null) return 0;
  // A list of strings or of id lists is several inputs; a list of numbers is one input's ids.
  const inputs = Array.isArray(value) && value.some((v) => typeof v !== 'number') ? value : [value];
  return inputs.reduce<number>((sum, v) => sum + INPUT_SPECIAL_TOKENS + mostTokens(v), 0);
}

/**
 * Pairs scored or reranked, each tokenized as one input: one item on a
 * side is paired with every item on the other (rerank's query with each
 * document), else they are paired in order.
 */
function pairsTokens(a: readonly unknown[], b: readonly unknown[]): number {
  const each = (side: readonly unknown[], times: number) => side.reduce<number>((s, v) => s + mostTokens(v) * times, 0);
  const pairs = Math.max(a.length, b.length);
  return each(a, a.length === 1 ? b.length : 1) + each(b, b.length === 1 ? a.length : 1) + pairs * INPUT_SPECIAL_TOKENS;
}

function asList(value: unknown): readonly unknown[] {
  if (value === undefined || value === null) return [];
  return Array.isArray(value) ? value : [value];
}

/**
 * An upper bound on the tokens of anything a template renders as text: a
 * string's bytes; a number (a token id) or a boolean one; a media part its
 * allowance; tool calls their wrapping and themselves as JSON; anything
 * else the sum of its values. Keys are not counted: a message's keys are
 * the template's markup, counted in MESSAGE_TOKENS.
 */
function mostTokens(value: unknown, depth = 0): number {
  if (typeof value === 'string') return Buffer.byteLength(value);
  if (typeof value === 'number' || typeof value === 'boolean') return 1;
  if (value === null || typeof value !== 'object') return 0;
  // Past any depth a chat has, the whole as JSON still bounds it: nothing goes uncounted.
  if (depth > 16) return jsonTokens(value);
  if (Array.isArray(value)) return value.reduce<number>((sum, v) => sum + mostTokens(v, depth + 1), 0);
  const o = value as Record<string, unknown>;
  if (isMediaPart(o)) return MEDIA_PART_TOKENS;
  let tokens = 0;
  // for…in, not Object.entries: no array per object on a budgeted request's path (parsed JSON inherits nothing).
  for (const k in o) {
    const v = o[k];
    // Tool calls as JSON, keys and all: templates render them so (`tool_call.function | tojson`), and an engine
    // may parse a call's arguments and render them again, spaced (vLLM does for Llama and Mistral).
    if (k === 'tool_calls' && Array.isArray(v)) tokens += v.length * TOOL_CALL_TOKENS + jsonTokens(v);
    else if (k === 'function_call' && v !== null && typeof v === 'object') tokens += TOOL_CALL_TOKENS + jsonTokens(v);
    else tokens += mostTokens(v, depth + 1);
  }
  return tokens;
}

function isMediaPart(o: Record<string, unknown>): boolean {
  if (typeof o.type === 'string') return MEDIA_PARTS.has(o.type);
  // A part without a type names its kind by its field.
  return 'image_url' in o || 'input_audio' in o || 'audio_url' in o || 'video_url' in o;
}

/** A JSON value as a template renders it (`tojson`, maybe indented): its bytes, and room for the spacing at its structure. */
function jsonTokens(value: unknown): number {
  return jsonTextTokens(JSON.stringify(value) ?? '');
}

function jsonTextTokens(text: string): number {
  let structure = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    // { } [ ] , :
    if (c === 123 || c === 125 || c === 91 || c === 93 || c === 44 || c === 58) structure++;
  }
  return Buffer.byteLength(text) + structure * JSON_STRUCTURE_TOKENS;
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
