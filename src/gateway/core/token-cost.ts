// What a request may cost its key at most, in tokens: the reservation the
// rate-limit hook (admission.ts) takes against the key's per-minute token
// limit before anything is sent, and the words of the refusal of a request
// that alone may cost more than that limit. Pure: data in, data out, apart
// from the hooks that act on it and the ledger that settles it.
import type { ApiKeyRecord, RoutedModel } from '../ports/index.js';
import { mostPromptTokens } from './prompt-text.js';
import { generates, type Endpoint, type ParsedRequest } from './validate.js';

/** What a request may cost at most, and of what: the reservation and the refusal that names its parts. */
export interface TokenCost {
  /** The prompt's least size. */
  readonly prompt: number;
  /** Completion tokens per choice; 0 for an endpoint that generates nothing. */
  readonly completion: number;
  /** Where `completion` came from: the request's own max_tokens (or max_completion_tokens), the model's limits.max_tokens, or the router's default. */
  readonly completionFrom: 'request' | 'model' | 'default';
  /** Choices (n); 1 unless the request asks for more. */
  readonly choices: number;
  readonly total: number;
}

/**
 * What a request may cost at most, reserved against its key's token limit:
 * the completion it asks for (max_tokens, else max_completion_tokens, else
 * the model's limits.max_tokens, else `defaultReserveTokens`) per choice,
 * plus the prompt's least size. Embeddings, rerank, score, tokenize and
 * transcriptions complete nothing: their prompt's least size alone.
 */
export function tokensToReserve(
  endpoint: Endpoint,
  parsed: ParsedRequest,
  model: RoutedModel,
  defaultReserveTokens: number,
): TokenCost {
  const prompt = parsed.leastPromptTokens();
  if (!generates(endpoint)) return { prompt, completion: 0, completionFrom: 'request', choices: 1, total: prompt };
  const body = parsed.body;
  // Both given: engines differ in which wins (vLLM takes max_completion_tokens), so the larger is what it may cost.
  const given = [body.max_tokens, body.max_completion_tokens].filter((v): v is number => typeof v === 'number');
  const asked = given.length ? Math.max(...given) : null;
  const completion = asked ?? model.limits.maxTokens ?? defaultReserveTokens;
  const completionFrom = asked !== null ? 'request' : model.limits.maxTokens !== null ? 'model' : 'default';
  const choices = typeof body.n === 'number' && body.n > 1 ? body.n : 1;
  return { prompt, completion, completionFrom, choices, total: prompt + completion * choices };
}

/** What a hard budget holds for a request: every token it can be charged, so none spends past its hold. */
export interface BudgetHoldTokens {
  /** The prompt's upper bound (prompt-text.ts mostPromptTokens). */
  readonly prompt: number;
  /** Completion tokens of every choice of every prompt; 0 for an endpoint that generates nothing. */
  readonly completion: number;
  readonly total: number;
}

/**
 * What a hard budget holds for a request of this cost: the prompt's MOST
 * tokens (where the rate limit takes its least: a budget is overshot by at
 * most one lease only if no request spends past its hold, while a rate
 * limit's reservation is a pace), and its completion for each choice of each
 * prompt (a completions request with a list of prompts generates for every
 * one). Settlement charges the true usage and gives the rest back.
 */
export function budgetHold(endpoint: Endpoint, parsed: ParsedRequest, cost: TokenCost): BudgetHoldTokens {
  const prompt = mostPromptTokens(endpoint, parsed.body);
  const completion = cost.completion * cost.choices * promptCount(endpoint, parsed.body);
  return { prompt, completion, total: prompt + completion };
}

/** How many prompts a request generates for: a completions request's list of prompts (strings or token-id lists), else 1. */
function promptCount(endpoint: Endpoint, body: Record<string, unknown>): number {
  const prompt = body.prompt;
  if (endpoint !== 'completions' || !Array.isArray(prompt) || prompt.length === 0) return 1;
  return prompt.every((p) => typeof p === 'number') ? 1 : prompt.length;
}

/** The refusal of a request that alone may cost more than its key's per-minute token limit: both numbers, and what to send instead. */
export function overLimitMessage(key: ApiKeyRecord, model: RoutedModel, cost: TokenCost): string {
  const limit = key.tokensPerMinute!;
  const head = `this request may use up to ${cost.total} tokens, more than the ${limit} tokens per minute this API key (${key.prefix}…) may use in all, so no wait would admit it`;
  const ask = 'or ask the operator for a higher tokens_per_minute';
  const fits = Math.floor((limit - cost.prompt) / cost.choices);
  if (cost.completion === 0 || fits < 1) {
    return `${head}: its input alone is at least ${cost.prompt} tokens; send less input, ${ask}`;
  }
  const choices = cost.choices > 1 ? ` × ${cost.choices} choices (n)` : '';
  const asked =
    cost.completionFrom === 'request'
      ? `max_tokens ${cost.completion}${choices}`
      : cost.completionFrom === 'model'
        ? `no max_tokens, which counts as model \`${model.name}\`'s cap of ${cost.completion} (limits.max_tokens)${choices}`
        : `no max_tokens, which counts as ${cost.completion}${choices} (model \`${model.name}\` declares no limits.max_tokens)`;
  return `${head} (${asked}, plus at least ${cost.prompt} of prompt); send max_tokens of at most ${fits}, ${ask}`;
}
