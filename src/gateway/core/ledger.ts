// The ledger: what a request costs its key. A request's tokens are reserved
// against the key's per-minute limit at admission (the rate-limit hook, in
// admission.ts), before anything is sent; once it ends, what it did not use
// goes back and what it used is charged, and its usage is recorded, exactly
// once, whichever way it ended (answered, the client gone, an engine's
// error, a timeout, retried, served by a fallback, refused). Each request
// gets a Tab that holds its reservation and settles it; a second settle is
// a no-op, so an exit that forgot it is the only way to get it wrong, and
// ledger.test.ts counts settlements on every exit. Separate from the
// attempt loop and the relays, which only say when and with what status a
// request ended; the limiter and the usage sink are ports (../ports).
import type { Logger } from 'pino';
import type {
  ApiKeyRecord,
  BudgetDecision,
  BudgetGate,
  BudgetHold,
  LimitDecision,
  RequestLimiter,
  UsageSink,
} from '../ports/index.js';
import type { RequestRecord } from './request-log.js';
import type { TailKeeper } from './usage.js';
import type { Endpoint } from './validate.js';

export class Ledger {
  constructor(
    readonly limiter: RequestLimiter,
    private readonly usage: UsageSink,
    private readonly logger: Logger,
    /** Budgets per team and key; null = none. */
    readonly budgets: BudgetGate | null = null,
  ) {}

  /** A tab for one admitted request of `key` (null: keys are off) at `endpoint`, with nothing reserved yet. */
  open(key: ApiKeyRecord | null, endpoint: Endpoint): Tab {
    return new Tab(this, key, endpoint);
  }

  /** A request refused before it reserved anything (a rate limit): its usage is recorded, with no tokens. */
  refused(key: ApiKeyRecord | null, model: string, endpoint: Endpoint, status: number): void {
    this.record(key, model, endpoint, status, 0, 0);
  }

  /** One usage record; a sink that fails is logged, never the request's failure. */
  record(
    key: ApiKeyRecord | null,
    model: string,
    endpoint: Endpoint,
    status: number,
    promptTokens: number,
    completionTokens: number,
    replicaId?: string,
  ): void {
    const keyId = key?.id ?? 'anonymous';
    try {
      // One object of one shape or the other: a spread made a second object per request.
      this.usage.record(
        replicaId === undefined
          ? { keyId, model, endpoint, promptTokens, completionTokens, status }
          : { keyId, model, endpoint, promptTokens, completionTokens, status, replicaId },
      );
    } catch (err) {
      this.logger.error({ err }, 'the usage sink failed; this request is not accounted');
    }
  }
}

/** One request's account: its reservation, settled once. */
export class Tab {
  /** Tokens reserved against the key's token limit; 0 = none (no key, no token limit, or nothing reserved yet). */
  reservedTokens = 0;
  /** Its hold on the budgets of its key and team; null = none applies (or none taken yet). */
  private budgetHold: BudgetHold | null = null;
  /** Settled already (or its answer's settlement is under way): every later settle is a no-op. */
  private settled = false;

  constructor(
    private readonly ledger: Ledger,
    readonly key: ApiKeyRecord | null,
    private readonly endpoint: Endpoint,
  ) {}

  /** Whether the request's account is closed (or being closed from its answer). */
  get isSettled(): boolean {
    return this.settled;
  }

  /**
   * Admission: takes one request from the key's request limit and reserves
   * `tokens` (0 = none) from its token limit, or says why not. Only for a
   * request with a key.
   */
  reserve(tokens: number): LimitDecision {
    const key = this.key!;
    const decision = this.ledger.limiter.admit(key.id, key.requestsPerMinute, key.tokensPerMinute, tokens);
    if (decision.ok) this.reservedTokens = decision.reservedTokens ?? 0;
    return decision;
  }

  /**
   * Admission against the budgets of the key and its team: the request may
   * cost up to these tokens. On ok, its hold is settled with the tab. A
   * promise only while the request waits for a dry lease's renewal.
   */
  holdBudget(model: string, promptTokens: number, completionTokens: number): BudgetDecision | Promise<BudgetDecision> {
    const decision = this.ledger.budgets!.admit(this.key!, model, promptTokens, completionTokens);
    if (decision instanceof Promise) return decision.then((d) => this.takeHold(d));
    return this.takeHold(decision);
  }

  private takeHold(decision: BudgetDecision): BudgetDecision {
    if (!decision.ok) return decision;
    // A tab settled while its request waited for a renewal would never settle this hold: give it back now.
    if (this.settled) decision.hold?.release();
    else this.budgetHold = decision.hold;
    return decision;
  }

  /**
   * The request ended: the key is charged `promptTokens + completionTokens`
   * in place of its reservation, and its usage recorded under `model` (the
   * one that answered) with `status` (0: the client left). Once.
   */
  settle(model: string, status: number, promptTokens: number, completionTokens: number): void {
    if (this.settled) return;
    this.settled = true;
    this.book(model, status, promptTokens, completionTokens);
  }

  /**
   * An answer relayed to its end (or broken, or left by its client): settled
   * from the usage the engine put at its end, off the response's path (the
   * client already has its last byte). `events`: SSE events relayed, the
   * lower bound on tokens when the engine's usage never came, with the
   * prompt's least size from `prompt`. The tokens go into `trace` too.
   * `replicaId`: the replica that answered (its GPU cost prices the tokens
   * of a model without a token price). Once, as settle.
   */
  settleFromAnswer(
    model: string,
    status: number,
    tail: TailKeeper,
    events: number,
    prompt: { leastPromptTokens(): number },
    trace: RequestRecord,
    replicaId?: string,
  ): void {
    if (this.settled) return;
    this.settled = true;
    setImmediate(() => {
      let usage = tail.usage();
      if (!usage && events > 0) {
        // The engine's usage never came (the stream broke, the client left, or the engine ignores include_usage):
        // lower bounds, so that leaving a stream just before its end does not make its tokens free. An engine sends a
        // role chunk, a chunk per token, a finish chunk and [DONE].
        usage = { promptTokens: prompt.leastPromptTokens(), completionTokens: Math.max(0, events - 3) };
      }
      const promptTokens = usage?.promptTokens ?? 0;
      const completionTokens = usage?.completionTokens ?? 0;
      if (usage) {
        trace.promptTokens = promptTokens;
        trace.completionTokens = completionTokens;
        const cost = this.ledger.budgets?.cost(model, promptTokens, completionTokens);
        if (cost !== undefined) trace.cost = cost;
      }
      this.book(model, status, promptTokens, completionTokens, replicaId);
    });
  }

  /** A call that costs no tokens and is no usage (count_tokens): the whole reservation goes back at once, nothing recorded. */
  release(): void {
    if (this.settled) return;
    this.settled = true;
    if (this.key) this.ledger.limiter.settle(this.key.id, this.key.tokensPerMinute, this.reservedTokens, 0);
    this.budgetHold?.release();
  }

  private book(
    model: string,
    status: number,
    promptTokens: number,
    completionTokens: number,
    replicaId?: string,
  ): void {
    const key = this.key;
    if (key)
      this.ledger.limiter.settle(key.id, key.tokensPerMinute, this.reservedTokens, promptTokens + completionTokens);
    this.budgetHold?.settle(model, promptTokens, completionTokens, replicaId);
    this.ledger.record(key, model, this.endpoint, status, promptTokens, completionTokens, replicaId);
  }
}
