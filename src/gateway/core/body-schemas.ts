// The shape of each endpoint's body, as zod schemas, one table. Loose on
// purpose: engines accept many extra fields and the router must not lag
// behind them; for the pass-through endpoints (rerank, score, tokenize, a
// transcription's form) only what routing needs is checked. Separate from
// validate.ts, which runs them and adds the checks no schema can state
// (limits, redirects), so what each endpoint must send reads on its own.
import { z } from 'zod';
import type { Endpoint } from '../ports/endpoints.js';

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

/** Each endpoint's body schema, run by validate.ts. */
export const BODY_SCHEMAS: Record<Endpoint, z.ZodType> = {
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
