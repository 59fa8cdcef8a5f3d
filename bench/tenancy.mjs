// The teams-and-budgets side of `bench/router.mjs --phases tenancy`: what a
// router child is given with --tenancy, built from the same parts the
// control plane wires (src/control/teams, src/control/budgets), so the
// figure is what turning teams and budgets on costs per request. Apart from
// router.mjs because it is the one place the bench names tenancy's parts.
//
// The key is in team `ml`, not `default`. The team allows the bench's three
// models and caps each key at per-minute limits; the key narrows both (its
// own allowed models, requests and tokens per minute, so the rate limiter
// runs on every request). Three hard budgets, all too large to trip in a
// run: the team's in tokens per day and in dollars per month, and the key's
// own in tokens per day, so admission checks a key's and a team's leases
// together. Every model has a price, so each settled request is costed.
// The book is in memory: leases are synced with it in the background, as
// the control plane syncs them with its store, never on a request's path.
/** US dollars per million tokens, given to every model of a --tenancy router. */
export const BENCH_PRICE = { input_per_million: 0.5, output_per_million: 1.5 };

/**
 * A key's own limits, too large to trip in a run: the tenancy router's key
 * has them, and so has the other router's key with --key-limits, so that
 * the comparison is of what teams and budgets add, not of the rate limiter
 * and the model check every key with limits paid before teams existed.
 */
export const BENCH_KEY_LIMITS = { requestsPerMinute: 100_000_000, tokensPerMinute: 100_000_000_000 };

/**
 * The key store (keys narrowed by their team), the budget gate and the one
 * key to use, for a router serving `models` (a Map of compiled models).
 * `dist(path)` names a module of the build.
 */
export async function tenancyParts(dist, models, logger) {
  const { MemoryKeyStore, issueKey } = await import(dist('control/keys/index.js'));
  const { MemoryTeams, TeamKeys, defaultTeam } = await import(dist('control/teams/index.js'));
  const { BudgetLeases, MemoryBudgetBook, catalogPrices } = await import(dist('control/budgets/index.js'));
  const names = [...models.keys()];
  const now = Date.now();
  const teams = new MemoryTeams([
    defaultTeam(now),
    {
      name: 'ml',
      allowedModels: names,
      requestsPerMinute: 1_000_000_000,
      tokensPerMinute: 1_000_000_000_000,
      createdAtMs: now,
      createdBy: 'bench',
      updatedAtMs: now,
    },
  ]);
  const keys = new TeamKeys(new MemoryKeyStore(), teams, (n) => models.get(n)?.name);
  const { record, secret } = await issueKey(
    keys,
    {
      name: 'bench',
      team: 'ml',
      allowedModels: names,
      ...BENCH_KEY_LIMITS,
    },
    now,
    'bench',
  );
  const book = new MemoryBudgetBook();
  const budget = (id, scope, subject, unit, period, amount) =>
    book.create({
      id,
      scope,
      subject,
      unit,
      period,
      amount,
      enforce: 'hard',
      alertAt: 0.8,
      createdAtMs: now,
      createdBy: 'bench',
    });
  await budget('b_team_tokens', 'team', 'ml', 'tokens', 'day', 1e15);
  await budget('b_team_usd', 'team', 'ml', 'usd', 'month', 1e9);
  await budget('b_key_tokens', 'key', record.id, 'tokens', 'day', 1e15);
  const gate = new BudgetLeases({
    book,
    prices: catalogPrices((n) => models.get(n)?.definition.price),
    now: Date.now,
    logger,
  });
  await gate.reload();
  return { keys, budgets: gate, secret };
}
