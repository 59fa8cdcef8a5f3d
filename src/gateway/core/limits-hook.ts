// The limit hooks of admission, after the call hook has admitted the body:
// the key's rate limit (requests and tokens per minute, with OpenAI's
// x-ratelimit-* headers) and its and its team's hard budgets. Each reserves
// what the request may cost on its tab, or refuses with 429 and says when to
// come back. Apart from admission.ts, which reads the key and the body,
// because these are the part that spends: what a request may take from
// limits shared with every other request of its key and team.
import type { ServerResponse } from 'node:http';
import type { FastifyReply } from 'fastify';
import type { ApiKeyRecord, BudgetDecision } from '../ports/index.js';
import type { AdmissionDeps, AdmittedCall, Hook } from './admission.js';
import type { LimitDecision } from './rate-limit.js';
import { budgetHold, overLimitMessage, tokensToReserve, type BudgetHoldTokens, type TokenCost } from './token-cost.js';

/**
 * The rate-limit hook, after the call hook: a key with limits takes one
 * request and reserves the most tokens the call may cost (OpenAI's
 * x-ratelimit-* headers say what is left), or is refused with 429 and
 * Retry-After. A request that may cost more than the key's whole
 * per-minute token limit is refused first, with 429 and no Retry-After
 * (no wait would admit it), before it takes anything from the key's
 * buckets. A refusal is counted and recorded as usage under its model.
 * `countOnly` (count_tokens) reserves nothing: such a call generates
 * nothing and costs the key no tokens.
 */
export function rateLimitHook(deps: AdmissionDeps, { countOnly = false }: { countOnly?: boolean } = {}): Hook {
  const { defaultReserveTokens } = deps.options;
  return (request, reply, done) => {
    const key = request.apiKey;
    const call = request.call!;
    if (!key) return done();
    const model = call.model;
    const cost =
      key.tokensPerMinute === null || countOnly
        ? null
        : tokensToReserve(call.endpoint, call.parsed, model, defaultReserveTokens);
    const reserve = cost?.total ?? 0;
    if (cost !== null && reserve > key.tokensPerMinute!) {
      deps.count(model.name, 429, key);
      deps.ledger.refused(key, model.name, call.endpoint, 429);
      // OpenAI answers a request too large for a TPM limit with 429 too; x-should-retry stops its SDKs' (and Anthropic's) automatic retries.
      deps.refuse(
        reply,
        429,
        'LLMGW_REQUEST_OVER_TOKEN_LIMIT',
        overLimitMessage(key, model, cost),
        null,
        { 'x-should-retry': 'false' },
        true,
      );
      return;
    }
    const decision = call.tab.reserve(reserve);
    if (decision.remaining) setRateLimitHeaders(reply.raw, key, decision.remaining);
    if (!decision.ok) {
      if (decision.limit) call.limitedBy = decision.limit;
      deps.count(model.name, 429, key);
      deps.ledger.refused(key, model.name, call.endpoint, 429);
      const over =
        decision.limit === 'requests'
          ? `is over its limit of ${key.requestsPerMinute} requests per minute`
          : `has too few of its ${key.tokensPerMinute} tokens per minute left for this request, which reserves ${reserve} (max_tokens and the prompt; a smaller max_tokens reserves less)`;
      deps.refuse(
        reply,
        429,
        'LLMGW_RATE_LIMITED',
        `this API key (${key.prefix}…) ${over}; retry in ${decision.retryAfterS} s`,
        null,
        { 'retry-after': String(decision.retryAfterS) },
        true,
      );
      return;
    }
    if (cost !== null && cost.completion > 0 && cost.completionFrom !== 'request') call.completionCap = cost.completion;
    if (deps.ledger.budgets && !countOnly) return admitBudget(deps, reply, key, call, cost, done);
    done();
  };
}

/**
 * The budget check, after the rate limit: the request's most tokens
 * (budgetHold: its max_tokens per choice and its prompt's upper bound, so
 * that what it spends never runs past its hold, and a budget is overshot by
 * at most one lease per plane), and their price, against every hard budget
 * of its key and team, from this control plane's leases in memory. Refused
 * as spent, or as having less left than the request may use: 429 naming
 * the budget, what the request held and when it resets, with Retry-After.
 * A request that found its lease dry, or the store spent while requests
 * running here hold room it would fit in, waits (bounded,
 * budget_renew_wait) for the lease's renewal or for those holds to come
 * back; if neither comes in time, 503 LLMGW_BUDGET_UNSETTLED: the budget
 * is not known to be spent, retry. Either way the rate limit's reservation goes
 * back. A budgeted request that set no max_tokens is capped at what was
 * reserved, so what it spends cannot run past its reservation. Calls
 * `done` once admitted, never when refused.
 */
function admitBudget(
  deps: AdmissionDeps,
  reply: FastifyReply,
  key: ApiKeyRecord,
  call: AdmittedCall,
  known: TokenCost | null,
  done: (err?: Error) => void,
): void {
  const cost = known ?? tokensToReserve(call.endpoint, call.parsed, call.model, deps.options.defaultReserveTokens);
  const held = budgetHold(call.endpoint, call.parsed, cost);
  const decided = (decision: BudgetDecision): void => {
    if (!decision.ok) return refuseBudget(deps, reply, key, call, decision, held);
    if (decision.hold && cost.completion > 0 && cost.completionFrom !== 'request') call.completionCap = cost.completion;
    done();
  };
  const decision = call.tab.holdBudget(call.model.name, held.prompt, held.completion);
  // Only a request whose lease ran dry waits; every other one is decided here, with no turn of the event loop.
  if (decision instanceof Promise)
    decision.then(decided, (err: unknown) => {
      call.tab.release();
      done(err as Error);
    });
  else decided(decision);
}

function refuseBudget(
  deps: AdmissionDeps,
  reply: FastifyReply,
  key: ApiKeyRecord,
  call: AdmittedCall,
  decision: Extract<BudgetDecision, { ok: false }>,
  held: BudgetHoldTokens,
): void {
  call.tab.release();
  const status = decision.unsettled ? 503 : 429;
  deps.count(call.model.name, status, key);
  deps.ledger.refused(key, call.model.name, call.endpoint, status);
  const retry = { 'retry-after': String(decision.retryAfterS) };
  if (decision.unsettled)
    deps.refuse(
      reply,
      503,
      'LLMGW_BUDGET_UNSETTLED',
      `${decision.budget}, which this API key (${key.prefix}…) spends, is not known to be spent, but this gateway's lease of it ran dry, and neither did the store renew it nor did requests running here give back what they held in time; retry in ${decision.retryAfterS} s`,
      null,
      retry,
      true,
    );
  else
    deps.refuse(
      reply,
      429,
      'LLMGW_BUDGET_EXCEEDED',
      // Honest either way: the budget is spent, or what is left of it is less than this request may use.
      `this API key (${key.prefix}…) is over ${decision.budget}, or has less of it left than this request may use (${holdWords(held)}); it resets at ${new Date(decision.resetAtMs).toISOString()} (in ${decision.retryAfterS} s); ask the operator to raise it`,
      null,
      retry,
      true,
    );
}

/** What a budget held for a request, in a refusal: "up to 121 tokens: 16 of completion and at most 105 of prompt". */
function holdWords(held: BudgetHoldTokens): string {
  if (held.completion === 0) return `up to ${held.total} tokens of input`;
  return `up to ${held.total} tokens: ${held.completion} of completion and at most ${held.prompt} of prompt`;
}

/**
 * OpenAI's x-ratelimit-* headers for a key with limits: each limit and
 * what is left of it after this request (a client paces itself by them).
 */
function setRateLimitHeaders(
  res: ServerResponse,
  key: ApiKeyRecord,
  remaining: NonNullable<LimitDecision['remaining']>,
): void {
  // A limit the key has is in `remaining`; one it has not is absent.
  if (remaining.requests !== undefined) {
    res.setHeader('x-ratelimit-limit-requests', String(key.requestsPerMinute));
    res.setHeader('x-ratelimit-remaining-requests', String(remaining.requests));
  }
  if (remaining.tokens !== undefined) {
    res.setHeader('x-ratelimit-limit-tokens', String(key.tokensPerMinute));
    res.setHeader('x-ratelimit-remaining-tokens', String(remaining.tokens));
  }
}
