// What `llmgw gateway` processes tell a control plane that runs alone on its
// store (SQLite, where no Cluster runs): their use of each replica and the
// requests they hold for models at zero, written through the store as a
// following control plane writes them (cluster.ts). Read here every second
// and added to this control plane's own router's, so the scaler and idle
// stops count the requests that came in through the gateways. Apart from
// cluster.ts because a lone control plane has no election, no reports to
// pass on and no leader notes: only this read. With no gateway the rows are
// empty and nothing changes.
import type { Logger } from 'pino';
import type { ReplicaUse } from '../scaling/index.js';
import type { Store } from '../store/index.js';

/** Rows not refreshed for this long are a gateway's that stopped (they sync every second), ms. */
const FRESH_MS = 3000;
/** How often the rows are read, ms. */
const READ_EVERY_MS = 1000;
/** Rows older than this are deleted (each restarted gateway writes under a new id), ms. */
const PRUNE_OLDER_THAN_MS = 3_600_000;

export interface GatewayDemandOptions {
  store: Store;
  now: () => number;
  logger: Logger;
  /** Told when the gateways hold more requests for some model than at the last read: a pass should run now. */
  onMoreQueued: () => void;
}

export class GatewayDemand {
  private use: ReadonlyMap<string, ReplicaUse> = new Map();
  private queued: ReadonlyMap<string, number> = new Map();
  private timer: NodeJS.Timeout | null = null;
  private reading: Promise<void> = Promise.resolve();
  private lastPruneMs = 0;
  private failing = false;

  constructor(private readonly options: GatewayDemandOptions) {}

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      void this.refresh();
    }, READ_EVERY_MS);
    this.timer.unref();
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.reading;
  }

  /** `local` (this process's router's use) with the gateways' added: in flight summed, newest use kept. */
  withUse(local: ReadonlyMap<string, ReplicaUse>): ReadonlyMap<string, ReplicaUse> {
    if (this.use.size === 0) return local;
    const out = new Map(local);
    for (const [id, u] of this.use) {
      const mine = out.get(id);
      out.set(id, mine ? addUse(mine, u) : u);
    }
    return out;
  }

  /** `local` held requests per model with the gateways' added. */
  withQueued(local: ReadonlyMap<string, number>): Map<string, number> {
    const out = new Map(local);
    for (const [model, n] of this.queued) out.set(model, (out.get(model) ?? 0) + n);
    return out;
  }

  /** Reads the rows now (the timer calls it every second); reads never overlap. */
  refresh(): Promise<void> {
    this.reading = this.reading.then(() => this.read());
    return this.reading;
  }

  private async read(): Promise<void> {
    const { store, now: clock } = this.options;
    const now = clock();
    try {
      const [summed, queued] = await Promise.all([
        store.replicaUse.sum(now - FRESH_MS),
        store.modelDemand.sum(now - FRESH_MS),
      ]);
      const before = this.queued;
      this.use = new Map([...summed].map(([id, u]) => [id, { inFlight: u.inFlight, lastUsedAtMs: u.lastUsedAtMs }]));
      this.queued = queued;
      if ([...queued].some(([m, n]) => n > (before.get(m) ?? 0))) this.options.onMoreQueued();
      if (now - this.lastPruneMs > 60_000) {
        this.lastPruneMs = now;
        await store.replicaUse.prune(now - PRUNE_OLDER_THAN_MS);
      }
      if (this.failing) this.options.logger.info("gateway processes' demand is read from the store again");
      this.failing = false;
    } catch (err) {
      // Figures that can no longer age out must not hold a replica up: scale on this process's own meanwhile.
      this.use = new Map();
      this.queued = new Map();
      if (!this.failing)
        this.options.logger.warn(
          { err: (err as Error).message },
          "cannot read gateway processes' demand from the store; scaling counts this control plane's own until it returns",
        );
      this.failing = true;
    }
  }
}

function addUse(a: ReplicaUse, b: ReplicaUse): ReplicaUse {
  const last =
    a.lastUsedAtMs === null
      ? b.lastUsedAtMs
      : b.lastUsedAtMs === null
        ? a.lastUsedAtMs
        : Math.max(a.lastUsedAtMs, b.lastUsedAtMs);
  return { inFlight: a.inFlight + b.inFlight, lastUsedAtMs: last };
}
