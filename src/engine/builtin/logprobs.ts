// Token log-probabilities for the builtin engine. node-llama-cpp's chat and
// completion generators do not report probabilities, but a context sequence
// can re-evaluate tokens and return the model's next-token distribution at
// each (controlledEvaluate). So after a reply is generated, its tokens are
// evaluated once more from the end of the prompt, and each token's
// probability is read from the distribution before it. This costs one more
// pass over the reply, paid only by requests that ask for logprobs; it is
// separate from llama-runtime.ts because it is the one place that rewinds a
// sequence.
import type { LlamaContextSequence, LlamaModel, Token } from 'node-llama-cpp';
import { LlmgwError } from '../../errors/index.js';

/** Most alternatives per token, as OpenAI allows for top_logprobs. */
export const MAX_TOP_LOGPROBS = 20;

export interface TokenAlternative {
  token: string;
  logprob: number;
  /** UTF-8 bytes of the token's text as decoded; a token that is part of a character reads as U+FFFD. */
  bytes: number[];
}

export interface TokenLogprob extends TokenAlternative {
  /** The most likely tokens at this position, most likely first; empty when none were asked for. */
  top: TokenAlternative[];
}

/** OpenAI clamps log(0); so does this, since JSON has no -Infinity. */
const FLOOR = -9999;

/** The model's raw distribution: sampling settings must not reshape what is reported. */
const RAW = { temperature: 1, topK: 0, topP: 1, minP: 0 };

/**
 * Log-probabilities of `reply`, the tokens just generated on `sequence`
 * after a prompt that ends where they start. Leaves the sequence holding the
 * prompt and the reply but its last token, which is what a later request
 * expects to find there (node-llama-cpp reuses whatever prefix matches).
 */
export async function replyLogprobs(
  model: LlamaModel,
  sequence: LlamaContextSequence,
  promptTokens: number,
  reply: readonly Token[],
  top: number,
): Promise<TokenLogprob[]> {
  if (reply.length === 0) return [];
  const held = sequence.contextTokens;
  const start = replyStart(held, reply, promptTokens);
  const input: Token[] = [held[start - 1]!, ...reply.slice(0, -1)];
  await sequence.eraseContextTokenRanges([{ start: start - 1, end: held.length }]);
  const results = await sequence.controlledEvaluate(
    input.map((token) => [token, { generateNext: { probabilities: true, options: RAW } }]),
  );
  return reply.map((token, i) => {
    const probabilities = results[i]?.next.probabilities ?? new Map<Token, number>();
    const alternatives = [...probabilities.entries()].slice(0, top).map(([t, p]) => alternative(model, t, p));
    return { ...alternative(model, token, probabilities.get(token) ?? 0), top: alternatives };
  });
}

function alternative(model: LlamaModel, token: Token, probability: number): TokenAlternative {
  const text = model.detokenize([token], true);
  return {
    token: text,
    logprob: probability > 0 ? Math.max(Math.log(probability), FLOOR) : FLOOR,
    bytes: [...Buffer.from(text, 'utf8')],
  };
}

/**
 * Where the reply starts in what the sequence holds: the reply follows the
 * prompt (`promptTokens` long as counted), though its last token may not have been evaluated yet and tokens
 * node-llama-cpp held back (and never released as text) may follow it.
 */
function replyStart(held: readonly Token[], reply: readonly Token[], promptTokens: number): number {
  const fits = (start: number) =>
    start >= 1 &&
    start + reply.length - 1 <= held.length &&
    reply.every((token, i) => start + i >= held.length || held[start + i] === token);
  // The prompt as counted is where the reply should start; a repeated token makes a search ambiguous, so it is tried first.
  if (fits(promptTokens)) return promptTokens;
  for (let start = held.length - reply.length + 1; start >= 1; start--) if (fits(start)) return start;
  throw new LlmgwError('LLMGW_INTERNAL', 'the reply was not found in its sequence, so its logprobs cannot be computed');
}
