// Budgets and prices as the control plane builds them: the book (store or
// memory), the leases the gateway asks (BudgetGate), and the routes. One
// call from control-plane.ts, so that file names budgets once.
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { KeyStore } from '../../gateway/ports/index.js';
import type { EventSink } from '../events/index.js';
import type { Store } from '../store/index.js';
import { registerBudgetAdmin, type UsageCostRow } from './admin.js';
import { MemoryBudgetBook, StoredBudgetBook } from './book.js';
import type { GpuTotals } from './gpu-meter.js';
import { BudgetLeases } from './leases.js';
import { moneyViews, type MoneyViews } from './views.js';
import { catalogPrices, type ModelPrice } from './prices.js';

export interface Budgets {
  readonly gate: BudgetLeases;
  /** US dollars for these tokens of the model; undefined = no price. */
  cost(model: string, promptTokens: number, completionTokens: number): number | undefined;
  reload(): Promise<void>;
  /** Budgets and spend as the dashboard reads them, cut to a team-admin's teams where asked. */
  views(parts: {
    keys: KeyStore;
    usage?: () => Promise<UsageCostRow[]>;
    gpuTotals?: () => Promise<ReadonlyMap<string, GpuTotals>>;
  }): MoneyViews;
  register(
    adminApp: FastifyInstance,
    parts: {
      teamExists: (name: string) => boolean;
      keys: KeyStore;
      usage?: () => Promise<UsageCostRow[]>;
      gpuTotals?: () => Promise<ReadonlyMap<string, GpuTotals>>;
    },
  ): void;
  close(): Promise<void>;
}

export async function openBudgets(o: {
  store: Store | null;
  catalog: { resolve(name: string): { name: string; definition: { price?: ModelPrice | undefined } } | undefined };
  now: () => number;
  logger: Logger;
  events: EventSink;
  registry: Registry;
  leaseFraction?: number;
  syncIntervalMs?: number;
  /** How long a request whose lease ran dry waits for its renewal, ms (budget_renew_wait); absent = the leases' default. */
  renewWaitMs?: number;
}): Promise<Budgets> {
  const book = o.store ? new StoredBudgetBook(o.store.connection) : new MemoryBudgetBook();
  const priceOf = (model: string) => o.catalog.resolve(model)?.definition.price;
  const prices = catalogPrices(priceOf);
  const gate = new BudgetLeases({
    book,
    prices,
    now: o.now,
    logger: o.logger,
    events: o.events,
    registry: o.registry,
    ...(o.leaseFraction === undefined ? {} : { leaseFraction: o.leaseFraction }),
    ...(o.syncIntervalMs === undefined ? {} : { syncIntervalMs: o.syncIntervalMs }),
    ...(o.renewWaitMs === undefined ? {} : { renewWaitMs: o.renewWaitMs }),
  });
  await gate.reload();
  return {
    gate,
    cost: (model, p, c) => prices.cost(model, p, c),
    reload: () => gate.reload(),
    views: (parts) =>
      moneyViews({
        book,
        now: o.now,
        teamOf: teamOfIn(parts.keys),
        priceOf,
        usage: parts.usage,
        gpuTotals: parts.gpuTotals,
      }),
    register(adminApp, parts) {
      const keyList = () => {
        const l = parts.keys.list();
        return l instanceof Promise ? [] : l;
      };
      // The leases go back (what was spent reported) when the control plane closes its admin listener.
      adminApp.addHook('onClose', async () => gate.close());
      registerBudgetAdmin(adminApp, {
        book,
        now: o.now,
        changed: () => gate.reload(),
        teamExists: parts.teamExists,
        keyExists: (id) => keyList().some((k) => k.id === id),
        teamOf: teamOfIn(parts.keys),
        priceOf,
        ...(parts.usage ? { usage: parts.usage } : {}),
        ...(parts.gpuTotals ? { gpuTotals: parts.gpuTotals } : {}),
        audit: (actor, action, target, detail) =>
          void o.store?.audit
            .append({ actor, action, target, detail })
            .catch((err: unknown) => o.logger.error({ err }, 'audit write failed')),
      });
    },
    close: () => gate.close(),
  };
}

/**
 * A key id's team, read from the key store's cache (a store that answers
 * only asynchronously knows none). The views ask once per usage row or
 * budget: the list is read and indexed once per turn of the event loop, not
 * searched per row (a sorted copy of every key each time, thousands of
 * keys times thousands of rows). A key made since is seen at the next turn.
 */
export function teamOfIn(keys: Pick<KeyStore, 'list'>): (keyId: string) => string | undefined {
  let teams: Map<string, string | undefined> | null = null;
  return (id) => {
    if (teams === null) {
      const l = keys.list();
      if (l instanceof Promise) return undefined;
      teams = new Map(l.map((k) => [k.id, k.team]));
      setImmediate(() => (teams = null));
    }
    return teams.get(id);
  };
}
