// What a prompt's text amounts to, read without a tokenizer: the fewest
// tokens it can be (the context check, the token reservation and a cut
// stream's accounting act on it) and the prefix an engine's cache would
// share (prefix-affine routing hashes it). Separate from validate.ts because
// neither refuses anything: both are estimates that others act on.
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
