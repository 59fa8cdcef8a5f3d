// Plain checks that say "zod would accept this body" for the shapes nearly
// every request has (a chat, a completion, an embedding), so the schema in
// body-schemas.ts runs only when something is unusual. zod's safeParse
// builds a copy of the body and its context on every call, which the
// gateway paid on every inference request; these read the same fields and
// allocate nothing. Each check accepts a subset of what its schema accepts:
// a body it does not vouch for goes through zod as before, so a refusal and
// its words come from the schema alone. Kept beside the schemas, and tested
// against them (body-fast-path.test.ts), so the two cannot drift apart
// unseen.
import type { Endpoint } from '../ports/endpoints.js';

type Body = Record<string, unknown>;

function isObject(v: unknown): v is Body {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** `positiveInt.nullish()`: absent, null or a whole number of at least 1. */
function positiveIntOrNone(v: unknown): boolean {
  return v === undefined || v === null || (typeof v === 'number' && Number.isSafeInteger(v) && v >= 1);
}

/** The generation fields every generating endpoint shares (body-schemas.ts's `generation`). */
function plainGeneration(body: Body): boolean {
  const model = body.model;
  if (typeof model !== 'string' || model.length === 0) return false;
  if (!positiveIntOrNone(body.n) || !positiveIntOrNone(body.max_tokens)) return false;
  if (!positiveIntOrNone(body.max_completion_tokens)) return false;
  const stream = body.stream;
  if (stream !== undefined && stream !== null && typeof stream !== 'boolean') return false;
  const options = body.stream_options;
  if (options === undefined || options === null) return true;
  if (!isObject(options)) return false;
  const usage = options.include_usage;
  return usage === undefined || usage === null || typeof usage === 'boolean';
}

function plainChat(body: Body): boolean {
  if (!plainGeneration(body)) return false;
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0) return false;
  for (const m of messages) if (!isObject(m) || typeof m.role !== 'string') return false;
  return true;
}

/** A string, or a list of strings, of numbers, or of lists of numbers: the prompt and input union. */
function plainTextOrTokens(v: unknown): boolean {
  if (typeof v === 'string') return true;
  if (!Array.isArray(v)) return false;
  if (v.length === 0) return true;
  const first = typeof v[0];
  if (first === 'string' || first === 'number') {
    for (const x of v) if (typeof x !== first) return false;
    return true;
  }
  for (const x of v) {
    if (!Array.isArray(x)) return false;
    for (const t of x) if (typeof t !== 'number') return false;
  }
  return true;
}

function plainCompletion(body: Body): boolean {
  return plainGeneration(body) && plainTextOrTokens(body.prompt);
}

function plainEmbedding(body: Body): boolean {
  const model = body.model;
  return typeof model === 'string' && model.length > 0 && plainTextOrTokens(body.input);
}

/** Per endpoint, a check that vouches for a body its schema accepts; absent = always through the schema. */
export const PLAIN_BODY: Partial<Record<Endpoint, (body: Body) => boolean>> = {
  chat: plainChat,
  messages: plainChat,
  responses: plainChat,
  completions: plainCompletion,
  embeddings: plainEmbedding,
};
