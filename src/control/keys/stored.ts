// API keys and usage in the store, behind the KeyStore and UsageSink
// interfaces the router reads and writes. Keys are read on every request, so
// they are cached in memory and the cache is updated by this process's own
// writes; usage is added up in memory and written in batches, never on a
// request's path. Here, not in the store, so that the store knows nothing of
// keys: it only imports types from it, and nothing of it is loaded for the
// router, which sees KeyStore and UsageSink alone.
import type { StoreConnection } from '../store/index.js';
import { MemoryKeyStore, RevocationListeners, type ApiKeyRecord, type KeyStore } from './keys.js';
import { UsageRows, type UsageEvent, type UsageSink } from './usage.js';

export class StoredKeys implements KeyStore {
  /** The keys as the store holds them, indexed as the router reads them; replaced whole on reload. */
  private cache = new MemoryKeyStore();
  private readonly revocations = new RevocationListeners();

  private constructor(private readonly store: StoreConnection) {}

  static async create(store: StoreConnection): Promise<StoredKeys> {
    const keys = new StoredKeys(store);
    await keys.reload();
    return keys;
  }

  async reload(): Promise<void> {
    const rows = await this.store.db.selectFrom('api_keys').selectAll().execute();
    const cache = new MemoryKeyStore();
    for (const r of rows) {
      cache.create({
        id: r.id,
        name: r.name,
        prefix: r.prefix,
        hash: r.hash,
        allowedModels: r.allowed_models === null ? null : (JSON.parse(r.allowed_models) as string[]),
        requestsPerMinute: r.requests_per_minute,
        tokensPerMinute: r.tokens_per_minute,
        expiresAtMs: r.expires_at,
        createdAtMs: r.created_at,
        createdBy: r.created_by,
        revokedAtMs: r.revoked_at,
        team: r.team,
        ...(r.priority === 'batch' ? { priority: 'batch' as const } : {}),
      });
    }
    const before = this.cache;
    this.cache = cache;
    // Keys another instance revoked, read here for the first time: their running requests here end too.
    for (const r of cache.list())
      if (r.revokedAtMs !== null && before.get(r.id)?.revokedAtMs === null) this.revocations.revoked(r.id);
  }

  async create(record: ApiKeyRecord): Promise<void> {
    await this.store.db
      .insertInto('api_keys')
      .values({
        id: record.id,
        name: record.name,
        prefix: record.prefix,
        hash: record.hash,
        allowed_models: record.allowedModels === null ? null : JSON.stringify(record.allowedModels),
        requests_per_minute: record.requestsPerMinute,
        tokens_per_minute: record.tokensPerMinute,
        expires_at: record.expiresAtMs,
        created_at: record.createdAtMs,
        created_by: record.createdBy,
        revoked_at: record.revokedAtMs,
        ...(record.team === undefined ? {} : { team: record.team }),
        ...(record.priority === 'batch' ? { priority: 'batch' } : {}),
      })
      .execute();
    await this.store.announce(this.store.db, 'keys');
    this.cache.create(record);
  }

  list(): readonly ApiKeyRecord[] {
    return this.cache.list();
  }

  async revoke(id: string, atMs: number): Promise<boolean> {
    const result = await this.store.db
      .updateTable('api_keys')
      .set({ revoked_at: atMs })
      .where('id', '=', id)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    await this.store.announce(this.store.db, 'keys');
    const wasLive = this.cache.get(id)?.revokedAtMs === null;
    // A key another instance made and this one has not reloaded yet: the store's answer stands.
    const found = this.cache.revoke(id, atMs) || Number(result.numUpdatedRows) > 0;
    if (wasLive || Number(result.numUpdatedRows) > 0) this.revocations.revoked(id);
    return found;
  }

  lookupByHash(hash: string): ApiKeyRecord | undefined {
    return this.cache.lookupByHash(hash);
  }

  onRevoked(listener: (keyId: string) => void): () => void {
    return this.revocations.add(listener);
  }
}

interface Totals {
  requests: number;
  errors: number;
  promptTokens: number;
  completionTokens: number;
  /** US dollars; 0 for a model without a price. */
  costUsd: number;
}

export interface UsageRow {
  key_id: string;
  model: string;
  /** The API called; 'unknown' for what was counted before usage was kept per endpoint. */
  endpoint: string;
  requests: number;
  errors: number;
  prompt_tokens: number;
  completion_tokens: number;
}

/** Adds usage up in memory; `flush()` writes the sums in one transaction (called on a timer and at close). */
export class StoredUsage implements UsageSink {
  private readonly pending = new UsageRows<Totals & { keyId: string; model: string; endpoint: string }>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly store: StoreConnection,
    private readonly now: () => number = Date.now,
    flushIntervalMs = 2000,
    /** What these tokens of a model cost in US dollars; absent, or undefined for a model, = 0. */
    private readonly cost: (model: string, promptTokens: number, completionTokens: number) => number | undefined = () =>
      undefined,
  ) {
    if (flushIntervalMs > 0) {
      this.timer = setInterval(() => void this.flush().catch(() => {}), flushIntervalMs);
      this.timer.unref();
    }
  }

  record(e: UsageEvent): void {
    this.add(e.keyId, e.model, e.endpoint, {
      requests: 1,
      errors: e.status === 0 || e.status >= 400 ? 1 : 0,
      promptTokens: e.promptTokens,
      completionTokens: e.completionTokens,
      costUsd: this.cost(e.model, e.promptTokens, e.completionTokens) ?? 0,
    });
  }

  /** Adds US dollars to a row without a request or token: the cost derived from GPU-hours, known at the interval's end. */
  charge(keyId: string, model: string, endpoint: string, costUsd: number): void {
    this.add(keyId, model, endpoint, { requests: 0, errors: 0, promptTokens: 0, completionTokens: 0, costUsd });
  }

  private add(keyId: string, model: string, endpoint: string, totals: Totals): void {
    let t = this.pending.get(keyId, model, endpoint);
    if (!t) {
      t = { keyId, model, endpoint, requests: 0, errors: 0, promptTokens: 0, completionTokens: 0, costUsd: 0 };
      this.pending.set(keyId, model, endpoint, t);
    }
    t.requests += totals.requests;
    t.errors += totals.errors;
    t.promptTokens += totals.promptTokens;
    t.completionTokens += totals.completionTokens;
    t.costUsd += totals.costUsd;
  }

  async flush(): Promise<void> {
    if (this.pending.size === 0) return;
    const batch = this.pending.take();
    const at = this.now();
    try {
      await this.store.db.transaction().execute(async (tx) => {
        for (const t of batch) {
          await tx
            .insertInto('usage')
            .values({
              key_id: t.keyId,
              model: t.model,
              endpoint: t.endpoint,
              requests: t.requests,
              errors: t.errors,
              prompt_tokens: t.promptTokens,
              completion_tokens: t.completionTokens,
              cost_usd: t.costUsd,
              updated_at: at,
            })
            .onConflict((oc) =>
              oc.columns(['key_id', 'model', 'endpoint']).doUpdateSet((eb) => ({
                requests: eb('usage.requests', '+', t.requests),
                errors: eb('usage.errors', '+', t.errors),
                prompt_tokens: eb('usage.prompt_tokens', '+', t.promptTokens),
                completion_tokens: eb('usage.completion_tokens', '+', t.completionTokens),
                cost_usd: eb('usage.cost_usd', '+', t.costUsd),
                updated_at: at,
              })),
            )
            .execute();
        }
      });
    } catch (err) {
      // The store is away: put the sums back so the next flush carries them.
      for (const t of batch) this.add(t.keyId, t.model, t.endpoint, t);
      throw err;
    }
  }

  /** Every row, or those of one endpoint; ordered by key, model and endpoint. */
  async list(filter: { endpoint?: string } = {}): Promise<UsageRow[]> {
    let query = this.store.db
      .selectFrom('usage')
      .select(['key_id', 'model', 'endpoint', 'requests', 'errors', 'prompt_tokens', 'completion_tokens']);
    if (filter.endpoint !== undefined) query = query.where('endpoint', '=', filter.endpoint);
    const rows = await query.orderBy('key_id').orderBy('model').orderBy('endpoint').execute();
    return rows.map((r) => ({
      ...r,
      requests: Number(r.requests),
      errors: Number(r.errors),
      prompt_tokens: Number(r.prompt_tokens),
      completion_tokens: Number(r.completion_tokens),
    }));
  }

  /** Every key and model's totals over endpoints, with what they cost (US dollars at the price when each request ran). */
  async costs(): Promise<
    {
      key_id: string;
      model: string;
      requests: number;
      prompt_tokens: number;
      completion_tokens: number;
      cost_usd: number;
    }[]
  > {
    const rows = await this.store.db
      .selectFrom('usage')
      .select((eb) => [
        'key_id',
        'model',
        eb.fn.sum<number>('requests').as('requests'),
        eb.fn.sum<number>('prompt_tokens').as('prompt_tokens'),
        eb.fn.sum<number>('completion_tokens').as('completion_tokens'),
        eb.fn.sum<number>('cost_usd').as('cost_usd'),
      ])
      .groupBy(['key_id', 'model'])
      .orderBy('key_id')
      .orderBy('model')
      .execute();
    return rows.map((r) => ({
      key_id: r.key_id,
      model: r.model,
      requests: Number(r.requests),
      prompt_tokens: Number(r.prompt_tokens),
      completion_tokens: Number(r.completion_tokens),
      cost_usd: Number(r.cost_usd),
    }));
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.flush().catch(() => {});
  }
}
