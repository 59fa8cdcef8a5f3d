// One control-plane instance among several on one Postgres: the glue that
// makes the others' work visible here and this one's visible there. Every
// instance serves clients, admins and agents; one, elected through an
// advisory lock (elector.ts), leads the reconciler and fences its writes with
// its epoch. What the others need crosses through the store:
//
// - catalog, keys, node states and replicas: written by whichever instance,
//   announced with NOTIFY, reloaded here at once (and polled every sync
//   interval in case a notification was missed);
// - heartbeats: each instance flushes the ones it received; liveness here is
//   judged on the newest from any instance (Inventory.refresh);
// - agents' shard reports: written by the instance that received them, read
//   and applied by the leader;
// - the router's use of replicas (in flight, last used): written by every
//   instance, summed by the leader for scaling and idleness.
//
// A follower serves replica readiness and draining from the store's rows; the
// leader serves from its own records, which it writes. With SQLite there is
// one control plane and none of this runs for it: it always leads. A gateway
// process (src/control/gateway-process.ts) runs this as a non-candidate, on
// either store: it follows, never stands for leader, and reports its use.
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { ControlPlaneView } from '../../api/types.js';
import { ShardStatusSchema, type ShardStatus } from '../../protocol/index.js';
import type { Catalog } from '../catalog/index.js';
import type { Inventory, Node } from '../inventory/index.js';
import type { BlockedDrain, ModelRejections, Reconciler } from '../reconciler/index.js';
import type { ReplicaUse } from '../scaling/index.js';
import type { Store } from '../store/index.js';
import { LeaderElector } from './elector.js';
import { ShardReportQueue } from './report-queue.js';
import { SharedRateLimiter } from './shared-rate-limit.js';

export const RECONCILER_ROLE = 'reconciler';

export interface ClusterOptions {
  /** A Postgres store (SQLite only for a non-candidate); the cluster sets its leader fence. */
  store: Store;
  /**
   * The same store's URL: the elector holds its lock and LISTENs on a
   * connection of its own. Null (SQLite): no elector; this instance never
   * leads (only a non-candidate may have none) and polls every sync interval.
   */
  url: string | null;
  /** False: never stands for leader (a gateway process); it still follows and reports its use. Absent = true. */
  candidate?: boolean;
  /** This instance's id; absent = hostname, pid and a random suffix. */
  instanceId?: string;
  now: () => number;
  logger: Logger;
  /** How often everything shared is polled (a missed NOTIFY costs at most this), ms. Default 1000. */
  syncIntervalMs?: number;
  /** How often received shard reports are written, and read by the leader, ms. Default 200. */
  reportIntervalMs?: number;
  /** How often rate-limit counts are exchanged, ms. Default 200 (see shared-rate-limit.ts for the tolerance). */
  rateSyncIntervalMs?: number;
  /** How often followers try for the lock, ms. Default 1000. */
  electionRetryMs?: number;
  /**
   * After winning the lock, how long to wait before the first pass, ms, so
   * heartbeats the other instances received (flushed every second) are in
   * the store and no live node is judged lost. Default 1500.
   */
  takeoverGraceMs?: number;
  /** Reports older than this are a dead instance's and never applied, ms; the inventory's stale window fits. Default 15 000. */
  reportMaxAgeMs?: number;
}

/** What the cluster reads and drives; attached once the control plane has built them. */
export interface ClusterParts {
  catalog: Catalog;
  keys: { reload(): Promise<void> };
  inventory: Inventory;
  reconciler: Reconciler;
  /** The router's use per replica; no entry = no use here. */
  replicaUse: () => ReadonlyMap<string, ReplicaUse>;
  /** Requests the router holds per model while no replica is ready; absent = none are reported. */
  queued?: () => ReadonlyMap<string, number>;
}

const ShardStatusList = z.array(ShardStatusSchema);

export class Cluster {
  readonly instanceId: string;
  /** Per-key rate limits counted across every instance; the router's limiter. */
  readonly limiter: SharedRateLimiter;
  /** Null: no Postgres to elect or listen on (a gateway process on SQLite). */
  private readonly elector: LeaderElector | null;
  private parts: ClusterParts | null = null;
  /** True once a new leader has adopted the store's replicas; the reconciler's `leads`. */
  private leadingNow = false;
  /** The last sum of every instance's replica use; null before the first (see fleetUse). */
  private fleetUseSeen: ReadonlyMap<string, ReplicaUse> | null = null;
  /** The last sum of every instance's held requests per model; null before the first (see fleetQueued). */
  private fleetQueuedSeen: ReadonlyMap<string, number> | null = null;
  /** This instance's last sync wrote held requests (so the next one with none must clear them). */
  private demandWritten = false;
  private urls: { client: string; admin: string; agent: string } | null = null;
  private readonly startedAtMs: number;
  private syncTimer: NodeJS.Timeout | null = null;
  private reportTimer: NodeJS.Timeout | null = null;
  private syncing: Promise<void> = Promise.resolve();
  private reporting: Promise<void> = Promise.resolve();
  private dirty = new Set<string>();
  private dirtyTimer: NodeJS.Timeout | null = null;
  private readonly reports = new ShardReportQueue();
  /** Per node, when the report the leader last applied was received (by any instance). */
  private readonly appliedReportAt = new Map<string, number>();
  private reportCursorMs = 0;
  private storeReachable = true;
  /** The leader's last pass as it wrote it (followers show it); the leader answers from its own reconciler. */
  private notes: LeaderNotes = { explain: [], blockedDrains: [] };
  private notesWritten = '';
  private closed = false;
  private readonly syncMs: number;
  private readonly reportMs: number;

  constructor(private readonly options: ClusterOptions) {
    this.instanceId = options.instanceId ?? `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
    this.startedAtMs = options.now();
    this.syncMs = options.syncIntervalMs ?? 1000;
    this.reportMs = options.reportIntervalMs ?? 200;
    this.limiter = new SharedRateLimiter({
      store: options.store,
      now: options.now,
      logger: options.logger,
      ...(options.rateSyncIntervalMs === undefined ? {} : { syncIntervalMs: options.rateSyncIntervalMs }),
    });
    const candidate = options.candidate ?? true;
    if (candidate && options.url === null)
      throw new Error('a cluster candidate needs a Postgres URL to hold the leader lock on');
    this.elector =
      options.url === null
        ? null
        : new LeaderElector({
            store: options.store,
            url: options.url,
            candidate,
            instanceId: this.instanceId,
            role: RECONCILER_ROLE,
            retryIntervalMs: options.electionRetryMs ?? 1000,
            now: options.now,
            logger: options.logger,
            onElected: (epoch) => this.takeOver(epoch),
            onDeposed: () => {
              this.leadingNow = false;
              // Sums from this stint must not feed the next one's first pass.
              this.fleetUseSeen = null;
              this.fleetQueuedSeen = null;
            },
            onChange: (topic) => this.changed(topic),
          });
    options.store.setLeaderFence({
      role: RECONCILER_ROLE,
      // Only once adoption is done: a pass queued before it must not write over the store's newer rows.
      epoch: () => (this.leadingNow ? (this.elector?.heldEpoch ?? null) : null),
      onStale: (err) => this.elector?.stepDown(err.message),
    });
  }

  /** Whether this instance leads the reconciler now (and has adopted the store's replicas). */
  /**
   * Every instance's use of each replica, summed at the last sync, for the
   * scaler on the leader (in flight everywhere, newest use anywhere). Null on
   * a follower and before the first sum: then only this instance's own is known.
   */
  fleetUse(): ReadonlyMap<string, ReplicaUse> | null {
    return this.leadingNow ? this.fleetUseSeen : null;
  }

  /**
   * Requests held for models with no ready replica on every instance, summed
   * at the last sync: how a request for a model at zero that arrived on a
   * follower reaches the leader's scaler. Null on a follower and before the first sum.
   */
  fleetQueued(): ReadonlyMap<string, number> | null {
    return this.leadingNow ? this.fleetQueuedSeen : null;
  }

  leads(): boolean {
    return this.leadingNow;
  }

  get epoch(): number | null {
    return this.leadingNow ? (this.elector?.heldEpoch ?? null) : null;
  }

  attach(parts: ClusterParts): void {
    this.parts = parts;
  }

  /** Starts election and the sync loops; `urls` are what this instance listens on, for the control-planes list (absent = not listed). */
  start(urls?: { client: string; admin: string; agent: string }): void {
    if (this.closed || this.syncTimer) return;
    this.urls = urls ?? null;
    this.syncTimer = setInterval(() => void this.sync('*'), this.syncMs);
    this.syncTimer.unref();
    this.reportTimer = setInterval(() => void this.exchangeReports(), this.reportMs);
    this.reportTimer.unref();
    void this.sync('*');
    this.elector?.start();
  }

  /** An agent's shard report received here (the reconciler has it already): written for the other instances when it says something new. */
  onShardReport(node: Node, shards: readonly ShardStatus[]): void {
    const at = this.options.now();
    this.appliedReportAt.set(node.id, at);
    this.reports.offer(node.id, shards, at);
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const t of [this.syncTimer, this.reportTimer, this.dirtyTimer]) if (t) clearTimeout(t);
    await this.elector?.close();
    this.leadingNow = false;
    await this.syncing;
    await this.reporting;
    await this.limiter.close();
  }

  /** Why the leader's last pass could not place `model`, as it wrote it; for followers' explain-placement. */
  explain(model: string): ModelRejections | undefined {
    return this.notes.explain.find((e) => e.model === model);
  }

  /** Replicas the leader's last pass could not move off draining nodes, as it wrote them. */
  blockedDrains(): readonly BlockedDrain[] {
    return this.notes.blockedDrains;
  }

  /** Every instance seen in the last ten minutes, with which one leads. */
  async controlPlanes(): Promise<ControlPlaneView[]> {
    const now = this.options.now();
    const [rows, leader] = await Promise.all([
      this.options.store.controlPlanes.list(now - 600_000),
      this.options.store.leadership.read(RECONCILER_ROLE),
    ]);
    return rows.map((r) => {
      const isLeader = r.id === this.instanceId ? this.leadingNow : leader?.holder === r.id;
      return {
        id: r.id,
        ...(r.adminUrl ? { address: r.adminUrl } : {}),
        ...(r.clientUrl ? { client_url: r.clientUrl } : {}),
        ...(r.agentUrl ? { agent_url: r.agentUrl } : {}),
        is_leader: isLeader,
        ...(isLeader && leader ? { epoch: leader.epoch } : {}),
        last_seen: new Date(r.lastSeenMs).toISOString(),
        last_seen_seconds: Math.max(0, Math.floor((now - r.lastSeenMs) / 1000)),
        self: r.id === this.instanceId,
      };
    });
  }

  private async takeOver(epoch: number): Promise<void> {
    const grace = this.options.takeoverGraceMs ?? 1500;
    if (grace > 0) await new Promise((r) => setTimeout(r, grace));
    if (this.elector?.heldEpoch !== epoch || this.closed) return;
    const parts = this.parts;
    if (!parts) throw new Error('the cluster was elected before the control plane attached its parts');
    await parts.inventory.refresh();
    // Adopt: the replicas as the store has them, with every write of the previous epoch committed (the epoch
    // increment waited for them). Nothing running is restarted: the records say what agents already run.
    await parts.reconciler.reload();
    this.reportCursorMs = this.options.now() - (this.options.reportMaxAgeMs ?? 15_000);
    // What this instance remembers from leading before is stale, and silence it judged through the store
    // may be the store's, not the nodes': start both afresh. Then the fleet's demand, before the first pass
    // (a draining replica with requests in flight through another instance must not look finished).
    parts.reconciler.beginLeading();
    parts.inventory.restartSilenceClock();
    await this.sumFleetDemand(parts, this.options.now());
    if (this.elector?.heldEpoch !== epoch || this.closed) return;
    this.leadingNow = true;
    this.options.logger.info(
      { epoch, replicas: parts.reconciler.replicas().length },
      'leading the reconciler: adopted the stored replicas',
    );
    parts.reconciler.notify();
  }

  /** Every instance's use of each replica and held requests per model, summed for the scaler; returns the held ones. */
  private async sumFleetDemand(parts: ClusterParts, now: number): Promise<ReadonlyMap<string, number>> {
    const store = this.options.store;
    // Rows not refreshed for three sync intervals are a dead instance's: its in-flight requests died with it.
    const summed = await store.replicaUse.sum(now - 3 * this.syncMs);
    parts.reconciler.reportUse(summed);
    this.fleetUseSeen = summed;
    this.fleetQueuedSeen = await store.modelDemand.sum(now - 3 * this.syncMs);
    return this.fleetQueuedSeen;
  }

  /** A NOTIFY: reload that part soon, coalescing a burst of them. */
  private changed(topic: string): void {
    this.dirty.add(topic);
    if (this.dirtyTimer) return;
    this.dirtyTimer = setTimeout(() => {
      this.dirtyTimer = null;
      const topics = this.dirty;
      this.dirty = new Set();
      for (const t of topics) void this.sync(t);
    }, 20);
  }

  private sync(topic: string): Promise<void> {
    this.syncing = this.syncing.then(() => this.syncOnce(topic));
    return this.syncing;
  }

  private async syncOnce(topic: string): Promise<void> {
    const parts = this.parts;
    if (!parts || this.closed) return;
    const all = topic === '*';
    const store = this.options.store;
    const now = this.options.now();
    try {
      if (all || topic === 'catalog') {
        const before = modelsFingerprint(parts.catalog);
        await parts.catalog.reload();
        if (modelsFingerprint(parts.catalog) !== before) parts.reconciler.notify();
      }
      if (all || topic === 'keys') await parts.keys.reload();
      if (all || topic === 'nodes') await parts.inventory.refresh({ liveness: all });
      if ((all || topic === 'replicas') && !this.leadingNow) await parts.reconciler.reload();
      if (all) {
        if (this.urls)
          await store.controlPlanes.touch({
            id: this.instanceId,
            clientUrl: this.urls?.client ?? null,
            adminUrl: this.urls?.admin ?? null,
            agentUrl: this.urls?.agent ?? null,
            startedAtMs: this.startedAtMs,
            lastSeenMs: now,
          });
        const use = [...parts.replicaUse()].map(([replicaId, u]) => ({ replicaId, ...u }));
        await store.replicaUse.save(this.instanceId, use, now);
        // Rows are refreshed while requests are held (the leader reads only fresh ones); with none held, and none written last time, there is nothing to say.
        const queued = parts.queued?.() ?? new Map<string, number>();
        const holding = [...queued.values()].some((n) => n > 0);
        if (holding || this.demandWritten) await store.modelDemand.save(this.instanceId, queued, now);
        this.demandWritten = holding;
        if (this.leadingNow) {
          const queuedBefore = this.fleetQueuedSeen;
          const queuedNow = await this.sumFleetDemand(parts, now);
          // A request held on another instance for a model at zero: a pass now, not at the next tick.
          if ([...queuedNow].some(([m, n]) => n > (queuedBefore?.get(m) ?? 0))) parts.reconciler.notify();
          await store.controlPlanes.prune(now - 3_600_000);
          await store.replicaUse.prune(now - 3_600_000);
          const notes: LeaderNotes = {
            explain: parts.catalog.models().flatMap((m) => parts.reconciler.explain(m.name) ?? []),
            blockedDrains: [...parts.reconciler.blockedDrains()],
          };
          const body = JSON.stringify(notes);
          if (body !== this.notesWritten && this.epoch !== null) {
            await store.leadership.saveNotes(RECONCILER_ROLE, notes, this.epoch, now);
            this.notesWritten = body;
          }
        } else {
          const stored = await store.leadership.readNotes(RECONCILER_ROLE);
          this.notes = toLeaderNotes(stored?.body);
          this.notesWritten = '';
        }
      }
      if (!this.storeReachable) this.options.logger.info('the store is reachable again; shared state is back in step');
      this.storeReachable = true;
    } catch (err) {
      if (this.storeReachable) {
        this.options.logger.warn(
          { err: (err as Error).message, topic },
          'cannot sync with the store; serving from what this instance knows until it returns',
        );
      }
      this.storeReachable = false;
    }
  }

  /**
   * Writes the shard reports received here and hands those received
   * elsewhere to the reconciler: the leader folds them into the replicas; a
   * follower only keeps their fetch progress, so every instance shows it.
   */
  private exchangeReports(): Promise<void> {
    this.reporting = this.reporting.then(async () => {
      const parts = this.parts;
      if (!parts || this.closed) return;
      const queued = this.reports.take();
      const batch = queued.map((r) => ({ ...r, instanceId: this.instanceId }));
      try {
        await this.options.store.shardReports.save(batch);
      } catch {
        // Put back what is not newer already; the next round retries. Reports are level-triggered, so only the newest matters.
        this.reports.putBack(queued);
        return;
      }
      const now = this.options.now();
      const maxAge = this.options.reportMaxAgeMs ?? 15_000;
      let rows;
      try {
        rows = await this.options.store.shardReports.since(this.reportCursorMs, this.instanceId);
      } catch {
        return;
      }
      for (const row of rows) {
        this.reportCursorMs = Math.max(this.reportCursorMs, row.atMs);
        if (row.atMs < now - maxAge || row.atMs <= (this.appliedReportAt.get(row.nodeId) ?? 0)) continue;
        const node = parts.inventory.get(row.nodeId);
        const statuses = ShardStatusList.safeParse(row.shards);
        if (!node || !statuses.success) continue;
        this.appliedReportAt.set(row.nodeId, row.atMs);
        parts.reconciler.onShardReport(node, statuses.data, row.atMs);
      }
    });
    return this.reporting;
  }
}

interface LeaderNotes {
  explain: ModelRejections[];
  blockedDrains: BlockedDrain[];
}

/** Notes as stored, read leniently: anything unexpected (a newer leader's shape) reads as none. */
function toLeaderNotes(body: unknown): LeaderNotes {
  const b = body as Partial<LeaderNotes> | null | undefined;
  return {
    explain: Array.isArray(b?.explain)
      ? b.explain.filter((e) => typeof e?.model === 'string' && Array.isArray(e.rejections))
      : [],
    blockedDrains: Array.isArray(b?.blockedDrains)
      ? b.blockedDrains.filter((d) => typeof d?.reason === 'string' && Array.isArray(d.nodeIds))
      : [],
  };
}

function modelsFingerprint(catalog: Catalog): string {
  return JSON.stringify(catalog.models().map((m) => [m.name, m.definition]));
}
