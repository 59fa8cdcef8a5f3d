// The reconciler's loop and I/O around the pure pass: it holds the replica
// records (loaded from the store at start, so a restarted control plane
// adopts what agents still run), runs a pass on a tick and soon after
// notify(), persists what the plan changed and then publishes each node's
// shards on the assignment board, and writes the agents' shard reports
// (screened by report-trust.ts, folded by fold-report.ts) back to the records. Every change to the
// records goes through one queue, so a report arriving while a pass is
// persisting is applied after it, never lost. Before each pass the scaling
// bridge (scaling-bridge.ts) turns the router's demand into wanted numbers;
// after it, the class records what the pass decided that an operator would
// want to know (the events log). What the router reads of the records is
// the RouterView (router-view.ts), `view` here.
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { ShardStatus } from '../../protocol/index.js';
import type { KvEventsEndpoint } from '../../protocol/kv-events.js';
import type { AssignmentBoard } from '../agentapi/index.js';
import type { Catalog, Model } from '../catalog/index.js';
import type { EventSink } from '../events/index.js';
import type { Inventory, Node } from '../inventory/index.js';
import type { PlacementNode } from '../placement/index.js';
import type { Liveness, ProfileFit } from '../placement/index.js';
import type { DemandSnapshot, ReplicaLoad, ReplicaUse } from '../scaling/index.js';
import type { ReplicaRow, Store } from '../store/index.js';
import { applyPlan, assignmentsByNode } from './apply.js';
import { ReconcilerMetrics } from './metrics.js';
import { type BlockedDrain, type ModelRejections, type Plan, type PlanOptions, planPass } from './plan.js';
import { compilePlanOptions } from './plan-types.js';
import { fitPass } from './fit.js';
import { PlacementNodeCache } from './snapshot.js';
import { foldReport, ShardIndex, shardStateOf } from './fold-report.js';
import { type RefusedShard, REPORT_REFUSALS, type ReportRefusal, screenReport } from './report-trust.js';
import { placedEvents, placementFailedMessage, readyEvents } from './lifecycle-events.js';
import { type NodeUsage, nodeUsageOf } from './node-usage.js';
import { RouterView } from './router-view.js';
import { ServingCheck } from './serving.js';
import { ScalingBridge } from './scaling-bridge.js';
import { COUNTING_STATES, REPLICA_STATES, type ReplicaRecord, type ReplicaState } from './types.js';

/** How long a load sample is kept without a newer one, ms: far past any staleness rule, so only the departed are dropped. */
const LOAD_KEPT_MS = 60_000;
/**
 * The least time between two sweeps for such samples, ms: a sweep reads
 * every sample held, and loads come with every node's heartbeat (2,000 a
 * second from 10,000 nodes).
 */
const LOAD_SWEEP_EVERY_MS = 10_000;
/** The least time between two log lines about one node's refused shard statuses for one reason, ms. */
const REFUSAL_LOG_EVERY_MS = 60_000;
/** The least time between two passes that notify() starts, ms: short against the second an admin action may take to reach an agent. */
const NOTIFY_GAP_MS = 250;
/**
 * How old an engine sample the scaler still counts, ms. Longer than the
 * router's staleness (4 s): scaling decides over windows of tens of
 * seconds, and a sample refreshed every two scrapes of a busy engine must
 * not drop out between passes.
 */
const LOAD_FRESH_FOR_SCALING_MS = 10_000;

export interface ReconcilerOptions {
  catalog: Catalog;
  inventory: Inventory;
  assignments: AssignmentBoard;
  /** Null: replicas live only in memory (`store: none`); a restart places everything again. */
  store: Store | null;
  /** Epoch ms; injected so tests control time. */
  now: () => number;
  logger: Logger;
  /** How often a pass runs when nothing notifies sooner. */
  intervalMs: number;
  plan?: PlanOptions;
  /**
   * Whether this process leads the reconciler now; absent = always (SQLite or
   * no store: one instance). A follower runs no pass and writes no replica;
   * it serves the records reload() reads from the store (see src/control/leader).
   */
  leads?: () => boolean;
  /** New ids; absent = random ones. Tests pass a counter. */
  newId?: (kind: 'replica' | 'shard') => string;
  /** Where scaling decisions, drains, failures and node liveness changes are recorded; absent = the log only. */
  events?: EventSink;
  /** Where the reconciler's metrics go (passes, their duration and actions, replicas by state); absent = none. */
  registry?: Registry;
}

export class Reconciler {
  private records: ReplicaRecord[] = [];
  private queue: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | null = null;
  private soon: NodeJS.Timeout | null = null;
  /** When the last notified pass started, by performance.now(); -Infinity = none yet. */
  private lastNotifiedPassAt = -Infinity;
  /** The last applied pass: its rejections answer explain, and it lets the next pass skip models still blocked. */
  private lastPlan: Plan | undefined;
  private readonly fetches = new Map<string, NonNullable<ShardStatus['fetch']>>();
  /**
   * Each ready replica's engine load, from its API shard's status. Memory
   * only, like fetch progress: it changes every second and is worthless
   * after a restart. Every instance of several keeps its own copy from the
   * reports it receives and those the store passes on (src/control/leader),
   * so followers route by it too without a store write per sample.
   */
  private readonly loads = new Map<string, ReplicaLoad>();
  /** When samples of departed replicas were last swept from `loads` (epoch ms). */
  private loadsSweptAtMs = -Infinity;
  /** Where each replica's engine tells what its KV cache holds, as its API shard last said; memory only, like loads. */
  private readonly kvEvents = new Map<string, KvEventsEndpoint>();
  private readonly newId: (kind: 'replica' | 'shard') => string;
  private closed = false;
  /** The router's demand (use per replica, cold models) and the scaler's memory, turned into wanted numbers. */
  private readonly scaling: ScalingBridge;
  /** What the router reads: ready replicas, why none, whether one is coming (structurally the router's ReplicaDirectory). */
  readonly view: RouterView;
  /** Which replicas stored as ready are confirmed live since this process started: only those are routed to. */
  private readonly serving: ServingCheck;
  /** When each node's refused statuses were last logged, by node and reason (ms, options.now); cleared whole past 10,000 entries. */
  private readonly refusalsLogged = new Map<string, number>();
  /** Each node's liveness at the last pass, to record the changes; empty until the first pass. */
  private readonly livenessSeen = new Map<string, Liveness>();
  /** When this instance was made (options.now): readiness of a replica placed by an earlier run counts from here. */
  private readonly startedAtMs: number;

  private readonly metrics: ReconcilerMetrics | null;
  /** Where each node's shards are in `records`, so a heartbeat folds only its own node's replicas. */
  private readonly shardIndex = new ShardIndex();
  /** Each node as placement reads it, made again only when the node changed (most do not between two passes). */
  private readonly placementCache = new PlacementNodeCache();

  private constructor(private readonly options: ReconcilerOptions) {
    this.startedAtMs = options.now();
    this.newId = options.newId ?? ((kind) => `${kind === 'replica' ? 'rep' : 'sh'}-${randomBytes(6).toString('hex')}`);
    this.metrics = options.registry ? new ReconcilerMetrics(options.registry, () => this.records) : null;
    this.scaling = new ScalingBridge({
      now: options.now,
      logger: options.logger,
      ...(options.events ? { events: options.events } : {}),
    });
    this.serving = new ServingCheck(options.inventory, options.now());
    this.view = new RouterView({
      records: () => this.records,
      serves: (r) => this.serving.serves(r),
      explain: (model) => this.explain(model),
      scaling: (model) => options.catalog.get(model)?.scaling,
      engineOf: (model, profile) => options.catalog.get(model)?.profiles.find((p) => p.name === profile)?.engine,
      load: (replicaId) => this.loads.get(replicaId),
      kvEvents: (replicaId) => this.kvEvents.get(replicaId),
      scalesOnDemand: () => this.scaling.attached,
      wantCold: (model) => this.scaling.wantCold(model),
      notify: () => this.notify(),
      logger: options.logger,
    });
  }

  /**
   * Loads the records the store remembers and publishes their shards at once,
   * before any agent can ask: an agent that heard "run nothing" from a
   * freshly restarted control plane would stop engines it should keep.
   */
  static async create(options: ReconcilerOptions): Promise<Reconciler> {
    const r = new Reconciler(options);
    if (options.store)
      r.records = (await options.store.replicas.list()).map(fromRow).sort((a, b) => (a.id < b.id ? -1 : 1));
    r.publish();
    return r;
  }

  /** Starts the tick. */
  start(): void {
    if (this.timer || this.closed) return;
    this.timer = setInterval(() => this.notify(), this.options.intervalMs);
    this.timer.unref();
    this.notify();
  }

  /** Stops the tick and waits for the pass in progress. */
  async stop(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    if (this.soon) clearTimeout(this.soon);
    this.timer = null;
    this.soon = null;
    await this.queue;
  }

  /**
   * Runs a pass soon; calls before it starts are coalesced into one. At most
   * one notified pass per NOTIFY_GAP_MS: a pass reads every node, and a fleet
   * of 10,000 joining or sending its first reports notifies thousands of
   * times a second, which kept the control plane's core busy with passes.
   */
  notify(): void {
    if (this.soon || this.closed || this.options.leads?.() === false) return;
    // Scheduling only, never a decision: the real clock, not options.now.
    const waitMs = Math.min(NOTIFY_GAP_MS, Math.max(0, this.lastNotifiedPassAt + NOTIFY_GAP_MS - performance.now()));
    this.soon = setTimeout(() => {
      this.soon = null;
      this.lastNotifiedPassAt = performance.now();
      void this.pass().catch((err: unknown) => this.options.logger.error({ err }, 'reconciler pass failed'));
    }, waitMs);
  }

  /** One pass now, after whatever is queued; resolves with its plan. */
  pass(): Promise<Plan> {
    return this.enqueue(() => this.runPass());
  }

  /**
   * Replaces the records with the store's, after whatever is queued: how a
   * follower sees the leader's work, and how a new leader adopts it. Listeners
   * and agents hear only of a real change.
   */
  reload(): Promise<void> {
    return this.enqueue(async () => {
      const store = this.options.store;
      if (!store || this.closed) return;
      const records = this.scaling.withLastUsed(
        (await store.replicas.list()).map(fromRow).sort((a, b) => (a.id < b.id ? -1 : 1)),
      );
      if (JSON.stringify(records) === JSON.stringify(this.records)) return;
      this.records = records;
      this.recordsChanged();
      this.publish();
    });
  }

  /**
   * The agent's shard states for one node; applied in order with passes.
   * `receivedAtMs` is when the heartbeat reached a control plane (this one
   * when absent; another for a report passed on through the store), which
   * engine load samples are dated from.
   */
  onShardReport(node: Node, statuses: readonly ShardStatus[], receivedAtMs?: number): void {
    // Only what the node may speak for: its own shards, and nothing while it waits for approval (report-trust.ts).
    const approved = node.approval !== 'pending';
    const screened = screenReport(this.records, node.id, approved, statuses, this.shardIndex);
    if (screened.refused.length > 0) this.refusedReport(node.id, screened.refused);
    const believed = screened.believed;
    // Before the records fold it (queued): a shard that stops being ready is routed to no more from now.
    if (approved && this.serving.heardFrom(node.id, believed)) this.view.changed();
    // Fetch progress is for people, changes every heartbeat and is worthless after a restart: memory only, never the store.
    for (const s of believed) {
      if (s.state === 'fetching' && s.fetch) this.fetches.set(s.shard_id, s.fetch);
      else this.fetches.delete(s.shard_id);
    }
    this.foldLoads(believed, receivedAtMs ?? this.options.now());
    this.foldKvEvents(believed);
    // A heartbeat answered while the control plane closes: the store may already be gone, and the next start re-reads the agents anyway.
    // A pending node's empty list is not "I run nothing" either: it would stop the shards of a node held out for a GPU change.
    if (this.closed || !approved) return;
    void this.enqueue(() => this.applyReport(node.id, believed)).catch((err: unknown) =>
      this.options.logger.error({ err, node: node.id }, 'applying a shard report failed'),
    );
  }

  /**
   * Counts a heartbeat's refused statuses and logs them, once per node and
   * reason a minute: a node sends its report every few seconds, and one line
   * a heartbeat would bury the log while telling nothing new.
   */
  private refusedReport(nodeId: string, refused: readonly RefusedShard[]): void {
    this.metrics?.refused(refused);
    const now = this.options.now();
    for (const reason of REPORT_REFUSALS) {
      const mine = refused.filter((r) => r.reason === reason);
      const first = mine[0];
      if (!first) continue;
      const key = `${nodeId}\u0000${reason}`;
      const last = this.refusalsLogged.get(key);
      if (last !== undefined && now - last < REFUSAL_LOG_EVERY_MS) continue;
      if (this.refusalsLogged.size >= 10_000) this.refusalsLogged.clear();
      this.refusalsLogged.set(key, now);
      const fields = { node: nodeId, reason, shards: mine.length, shard: first.shardId, replica: first.replicaId };
      // A shard no replica has is what a restart without a store or a just-forgotten replica leaves: worth knowing, not an alarm.
      if (reason === 'unknown_shard') this.options.logger.info(fields, refusalText(nodeId, reason));
      else this.options.logger.warn(fields, refusalText(nodeId, reason));
    }
  }

  /**
   * Takes the engine loads of a report: a shard that serves the API and
   * carries a sample sets its replica's; one that serves the API without a
   * sample (metrics off, a failed read, not ready) clears it, so the router
   * counts in-flight requests instead of trusting an old number. A sample
   * older than what is held (a report the store passed on late) is ignored.
   */
  private foldLoads(statuses: readonly ShardStatus[], receivedAtMs: number): void {
    const changed: string[] = [];
    for (const s of statuses) {
      if (s.load) {
        const sampledAtMs = receivedAtMs - s.load.age_ms;
        if ((this.loads.get(s.replica_id)?.sampledAtMs ?? -Infinity) > sampledAtMs) continue;
        const kv = s.load.kv_usage;
        const hitRate = s.load.cache_hit_rate;
        this.loads.set(s.replica_id, {
          running: s.load.running,
          waiting: s.load.waiting,
          ...(kv === undefined ? {} : { kvUsage: kv }),
          ...(hitRate === undefined ? {} : { cacheHitRate: hitRate }),
          sampledAtMs,
        });
        changed.push(s.replica_id);
      } else if (s.endpoint !== undefined && this.loads.delete(s.replica_id)) {
        // Only the API shard (the one with an endpoint) speaks for the replica's load; other ranks never carry one.
        changed.push(s.replica_id);
      }
    }
    if (changed.length === 0) return;
    // Replicas gone from the records leave their last sample behind: dropped once it could not be fresh anyway.
    const now = this.options.now();
    if (now - this.loadsSweptAtMs >= LOAD_SWEEP_EVERY_MS) {
      this.loadsSweptAtMs = now;
      for (const [id, l] of this.loads) {
        if (l.sampledAtMs >= now - LOAD_KEPT_MS) continue;
        this.loads.delete(id);
        changed.push(id);
      }
    }
    this.view.loadsChanged(changed);
  }

  /**
   * Takes where each API shard's engine publishes its KV events (the shard
   * with an endpoint speaks for its replica; one without kv_events clears
   * it). The router's view is rebuilt only when one changed.
   */
  private foldKvEvents(statuses: readonly ShardStatus[]): void {
    const changed: string[] = [];
    for (const s of statuses) {
      if (s.endpoint === undefined) continue;
      const was = this.kvEvents.get(s.replica_id);
      if (s.kv_events === undefined) {
        if (this.kvEvents.delete(s.replica_id)) changed.push(s.replica_id);
      } else if (JSON.stringify(was) !== JSON.stringify(s.kv_events)) {
        this.kvEvents.set(s.replica_id, s.kv_events);
        changed.push(s.replica_id);
      }
    }
    if (changed.length === 0) return;
    // Replicas gone from the records leave nothing behind (and are in no model's list to rebuild).
    if (this.kvEvents.size > this.records.length) {
      const live = new Set(this.records.map((r) => r.id));
      for (const id of this.kvEvents.keys()) if (!live.has(id)) this.kvEvents.delete(id);
    }
    this.view.loadsChanged(changed);
  }

  /** The engine load last reported for a replica; undefined = none (not reported, or cleared). */
  loadOf(replicaId: string): ReplicaLoad | undefined {
    return this.loads.get(replicaId);
  }

  /** The newest download progress an agent reported for a shard that is fetching; undefined when none. */
  fetchProgress(shardId: string): NonNullable<ShardStatus['fetch']> | undefined {
    return this.fetches.get(shardId);
  }

  /**
   * Where each pass reads demand from (the router). Without one, nothing
   * scales on demand: a model runs scaling.min replicas, as before
   * autoscaling, and drains rely on reportUse.
   */
  attachDemand(source: () => DemandSnapshot): void {
    this.scaling.attach(source);
  }

  /**
   * This instance starts leading (again): what it remembered of demand and
   * decisions is from another time, while another instance led. Scaling
   * memory, in-flight and last-use numbers, liveness seen and the last plan
   * are dropped; idleness counts from now, as after a restart. The caller
   * reports the fleet's use (reportUse) before the first pass.
   */
  beginLeading(): void {
    this.scaling.reset();
    this.livenessSeen.clear();
    this.lastPlan = undefined;
  }

  /**
   * The router's seam: what each replica has in flight and when it was last
   * used, the whole fleet's at once. The records take the last uses in one
   * pass: reported a replica at a time, each report copied every record, so
   * a second's reports of n replicas in use cost n² record copies.
   */
  reportUse(uses: Iterable<readonly [string, Readonly<ReplicaUse>]>): void {
    let lastUsed = false;
    for (const [replicaId, use] of uses) if (this.scaling.report(replicaId, use)) lastUsed = true;
    if (!lastUsed) return;
    const before = this.records;
    this.records = this.scaling.withLastUsed(before);
    this.shardIndex.carry(before, this.records);
  }

  replicas(): readonly ReplicaRecord[] {
    return this.records;
  }

  /** Why the model was not placed in the last pass; undefined = nothing failed to place. */
  explain(model: string): ModelRejections | undefined {
    return this.lastPlan?.rejections.get(model);
  }

  /** Replicas the last pass could not move off draining nodes. */
  blockedDrains(): readonly BlockedDrain[] {
    return this.lastPlan?.blockedDrains ?? [];
  }

  /** Requests the router has in flight on a replica, for what a drain waits for; undefined = none reported. */
  inFlightOf(replicaId: string): number | undefined {
    return this.scaling.inFlight.get(replicaId);
  }

  /** How long a draining replica may finish what it serves before it is stopped anyway. */
  get drainDeadlineMs(): number {
    return compilePlanOptions(this.options.plan).drainDeadlineMs;
  }

  replicaCounts(): Map<string, { ready: number; total: number }> {
    const out = new Map<string, { ready: number; total: number }>();
    for (const r of this.records) {
      if (!COUNTING_STATES.has(r.state)) continue;
      const c = out.get(r.model) ?? { ready: 0, total: 0 };
      c.total++;
      if (r.state === 'ready') c.ready++;
      out.set(r.model, c);
    }
    return out;
  }

  /** Replicas per node and the GPUs their shards hold, for the node views. */
  nodeUsage(): Map<string, NodeUsage> {
    return nodeUsageOf(this.records);
  }

  /**
   * A pass as it would run now with `models` added to the catalog, for a
   * dry run: nothing is applied, stored or published, and the creation cap
   * does not apply (it paces real fetches, not a plan). Models already in
   * the catalog keep the wanted numbers scaling last gave them, so the GPUs
   * their replicas hold are not offered to the new ones.
   */
  preview(models: readonly Model[]): Plan {
    const names = new Set(models.map((m) => m.name));
    const now = this.options.now();
    return planPass(
      {
        now,
        models: [...this.options.catalog.models().filter((m) => !names.has(m.name)), ...models],
        nodes: this.placementNodes(now),
        replicas: this.records,
        inFlight: this.scaling.inFlight,
        ...(this.scaling.attached ? { wanted: this.scaling.lastWanted() } : {}),
      },
      { ...this.options.plan, maxCreatesPerPass: Number.MAX_SAFE_INTEGER },
    );
  }

  /** Per model asked about, which nodes could take a shard now, per profile, and why not the others; nothing is applied. */
  previewFit(models: readonly Model[]): Map<string, ProfileFit[]> {
    const now = this.options.now();
    return fitPass(
      { now, nodes: this.placementNodes(now), replicas: this.records, inFlight: this.scaling.inFlight },
      models,
      this.options.plan,
    );
  }

  private recordsChanged(): void {
    this.view.changed();
  }

  private enqueue<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn);
    this.queue = run.then(
      () => {},
      () => {},
    );
    return run;
  }

  private placementNodes(now: number): PlacementNode[] {
    const inv = this.options.inventory;
    return this.placementCache.convert(inv.list(), (n) => inv.liveness(n, now));
  }

  /** Passes that did something, counted for the log. */
  private passesWithActions = 0;

  private async runPass(): Promise<Plan> {
    const startedAt = performance.now();
    const now = this.options.now();
    const nodes = this.placementNodes(now);
    this.recordLiveness(nodes);
    const wanted = this.scale(now);
    const previous = this.lastPlan;
    const plan = planPass(
      {
        now,
        models: this.options.catalog.models(),
        nodes,
        replicas: this.records,
        inFlight: this.scaling.inFlight,
        ...(previous ? { previous } : {}),
        ...(wanted ? { wanted } : {}),
      },
      this.options.plan ?? {},
    );
    const known = new Set(this.records.map((r) => r.id));
    const applied = applyPlan(this.records, plan, { now, newId: this.newId });
    // Persist before publishing: an agent must never run a shard the store does not know of.
    await this.options.store?.replicas.save(applied.changed, applied.removed);
    this.records = this.scaling.withLastUsed(applied.records);
    this.recordsChanged();
    this.scaling.forget(applied.removed);
    this.lastPlan = plan;
    this.publish(nodes);
    this.recordPlanEvents(plan, previous, applied.changed, known);
    if (plan.actions.length) {
      const log = this.options.logger;
      // The pass number groups one pass's actions in the log (how many replicas one pass created, for instance).
      this.passesWithActions++;
      for (const a of plan.actions) {
        log.info(
          {
            pass: this.passesWithActions,
            action: a.kind,
            ...('replicaId' in a ? { replica: a.replicaId } : {}),
            ...('model' in a ? { model: a.model } : {}),
          },
          a.reason,
        );
      }
    }
    this.metrics?.passed((performance.now() - startedAt) / 1000, plan.actions);
    return plan;
  }

  /**
   * Reads the router's demand and asks the scaler for each model's wanted
   * number; undefined without a demand source (every model at scaling.min).
   * In-flight and last-use numbers read here also feed the pass's drains.
   */
  private scale(now: number): Map<string, number> | undefined {
    const demand = this.scaling.read();
    if (demand === undefined) return undefined;
    if (demand === null) return this.scaling.lastWanted();
    this.records = this.scaling.withLastUsed(this.records);
    // Engines' own counts, while fresh: an old one would keep a replica that went quiet looking busy.
    const engineQueued = new Map<string, number>();
    for (const [id, l] of this.loads)
      if (now - l.sampledAtMs <= LOAD_FRESH_FOR_SCALING_MS) engineQueued.set(id, l.running + l.waiting);
    return this.scaling.decide(
      now,
      this.records,
      this.options.catalog.models(),
      demand.queued,
      engineQueued,
      demand.batch,
    );
  }

  /** Nodes that went stale or were lost since the last pass (coming back is the inventory's to tell). */
  private recordLiveness(nodes: readonly PlacementNode[]): void {
    for (const n of nodes) {
      const before = this.livenessSeen.get(n.id);
      this.livenessSeen.set(n.id, n.liveness);
      // A node seen for the first time (at the first pass, or one that just joined) has changed nothing yet.
      if (before === undefined || before === n.liveness || !this.options.events) continue;
      if (n.liveness === 'stale')
        this.options.events.record({
          kind: 'node_stale',
          node: n.id,
          message: `node ${n.id} stopped sending heartbeats; its replicas stay until it is lost`,
        });
      if (n.liveness === 'lost')
        this.options.events.record({
          kind: 'node_lost',
          node: n.id,
          message: `node ${n.id} is lost (no heartbeat); its replicas are replaced elsewhere`,
        });
    }
  }

  /** Placements, drains, failures and new placement failures of a pass, for the events log. */
  private recordPlanEvents(
    plan: Plan,
    previous: Plan | undefined,
    changed: readonly ReplicaRecord[],
    known: ReadonlySet<string>,
  ): void {
    const events = this.options.events;
    if (!events) return;
    const retried = new Set(plan.actions.flatMap((a) => (a.kind === 'retry' ? [a.replicaId] : [])));
    const placed = changed.filter((r) => !known.has(r.id) || retried.has(r.id));
    for (const e of placedEvents(placed, retried, previous?.rejections)) events.record(e);
    const byId = new Map(this.records.map((r) => [r.id, r]));
    for (const a of plan.actions) {
      const model = 'model' in a ? a.model : byId.get(a.replicaId ?? '')?.model;
      const on = (id: string) => byId.get(id)?.shards[0]?.nodeId;
      if (a.kind === 'drain') {
        const node = on(a.replicaId);
        events.record({
          kind: 'drain',
          replica: a.replicaId,
          ...(model ? { model } : {}),
          ...(node ? { node } : {}),
          message: `replica ${a.replicaId} drains: ${a.reason}`,
        });
      } else if (a.kind === 'markFailed') {
        const node = on(a.replicaId);
        events.record({
          kind: 'replica_failed',
          replica: a.replicaId,
          ...(model ? { model } : {}),
          ...(node ? { node } : {}),
          message: `replica ${a.replicaId}: ${a.reason}`,
        });
      } else if (a.kind === 'markLost') {
        events.record({
          kind: 'replica_lost',
          replica: a.replicaId,
          ...(model ? { model } : {}),
          message: `replica ${a.replicaId}: ${a.reason}`,
        });
      }
    }
    // A blocked model is re-evaluated every pass that the fleet changes; only a new or different reason is news.
    for (const [model, rej] of plan.rejections) {
      const before = previous?.rejections.get(model);
      const first = rej.rejections[0]?.reason ?? 'no node fits';
      if (before && (before.rejections[0]?.reason ?? 'no node fits') === first) continue;
      events.record({
        kind: 'placement_failed',
        model,
        message: placementFailedMessage(rej),
      });
    }
  }

  private publish(nodes: readonly PlacementNode[] = this.placementNodes(this.options.now())): void {
    const models = new Map(this.options.catalog.models().map((m) => [m.name, m]));
    const byNode = new Map(nodes.map((n) => [n.id, n]));
    const assignments = assignmentsByNode(this.records, models, byNode, [...byNode.keys()]);
    for (const [nodeId, shards] of assignments) this.options.assignments.set(nodeId, shards);
  }

  private async applyReport(nodeId: string, statuses: readonly ShardStatus[]): Promise<void> {
    // A follower forwards reports through the store (src/control/leader); only the leader folds them in.
    if (this.options.leads?.() === false) return;
    const now = this.options.now();
    const before = this.records;
    const folded = foldReport(before, nodeId, statuses, now, this.shardIndex.on(before, nodeId));
    if (folded.changed.length === 0) return;
    this.records = [...folded.records];
    this.shardIndex.carry(before, this.records);
    if (this.options.events) {
      const byId = new Map(before.map((r) => [r.id, r]));
      for (const e of readyEvents(byId, folded.changed, now, this.startedAtMs)) this.options.events.record(e);
    }
    this.recordsChanged();
    await this.options.store?.replicas.save(folded.changed, []);
    if (folded.wake) this.notify();
  }
}

/** What a refusal's log line says: what was not believed, and what the operator can do. */
function refusalText(nodeId: string, reason: ReportRefusal): string {
  switch (reason) {
    case 'node_pending':
      return `node ${nodeId} waits for approval, so the shard states, loads and fetch progress it reports are not believed; llmgw ctl nodes approve ${nodeId} admits it if it is yours (logged once a minute)`;
    case 'not_assigned':
      return `node ${nodeId} reported shards that are not assigned to it (another node's, or under another replica's id); their state, load and fetch progress were not believed. A node that does this was changed or is not what it claims: check it, and remove it if it is not yours (llmgw ctl nodes rm ${nodeId}) (logged once a minute)`;
    case 'unknown_shard':
      return `node ${nodeId} reported shards no replica has (forgotten a moment ago, or this control plane restarted without a store); not believed, and the agent stops them as nothing assigns them (logged once a minute)`;
    case 'not_api_shard':
      return `node ${nodeId} reported an engine load for a shard that does not serve its replica's API (rank above 0); only rank 0's load counts, so it was not believed (logged once a minute)`;
  }
}

/** Stored rows read leniently: an unknown state (from a newer control plane) reads as the nearest safe one. */
function fromRow(row: ReplicaRow): ReplicaRecord {
  return {
    ...row,
    state: (REPLICA_STATES as readonly string[]).includes(row.state) ? (row.state as ReplicaState) : 'starting',
    shards: row.shards.map((s) => ({ ...s, state: shardStateOf(s.state) ?? 'starting' })),
  };
}
