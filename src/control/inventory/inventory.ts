// The inventory: what the control plane knows about its machines. Admin
// state (ready, cordoned, draining) is an operator's decision and persists;
// liveness (up, stale, lost) is derived from the last heartbeat and never
// stored as a state, so it cannot drift from the clock. Reports are kept as
// the agents sent them, read leniently: absent is unknown, never zero.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { LlmgwError } from '../../errors/index.js';
import { type NodeReport, NodeReportSchema } from '../../protocol/index.js';
import type { AuditActor, NodeRow, Store } from '../store/index.js';

export type AdminState = 'ready' | 'cordoned' | 'draining';
export type Liveness = 'up' | 'stale' | 'lost';
export const ADMIN_STATES: readonly AdminState[] = ['ready', 'cordoned', 'draining'];

export interface Node {
  readonly id: string;
  hostname: string | null;
  mgmtAddr: string | null;
  labels: Record<string, string>;
  adminState: AdminState;
  credentialHash: string;
  mgmtToken: string;
  agentVersion: string | null;
  protocolVersion: number | null;
  /** Epoch ms of the newest heartbeat; null = none since the node joined. */
  lastSeenMs: number | null;
  /** The newest report; null = none yet (all facts unknown). */
  report: NodeReport | null;
}

export interface InventoryOptions {
  /** Null: nodes live only in memory (`store: none`); a restart forgets the fleet until it reports again. */
  store: Store | null;
  now: () => number;
  staleAfterMs: number;
  lostAfterMs: number;
  /** How often buffered heartbeats are written to the store; 0 = on every heartbeat. */
  flushIntervalMs?: number;
}

export interface DiskTotals {
  freeBytes: number;
  totalBytes: number;
}

type Listener = (nodeId: string, why: string) => void;

/** How far back each refresh() looks again, ms: a few flush intervals plus clock skew between instances. */
const REFRESH_OVERLAP_MS = 10_000;

export function hashCredential(credential: string): string {
  return createHash('sha256').update(credential).digest('hex');
}

export class Inventory {
  private readonly nodes = new Map<string, Node>();
  private pending = new Map<string, { lastSeenMs: number; report?: unknown; agentVersion: string | null; protocolVersion: number | null }>();
  private flushTimer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> = Promise.resolve();
  private readonly listeners = new Set<Listener>();
  /** Per node, the capacity fingerprint of its newest report: computed once per report, not twice. */
  private readonly fingerprints = new Map<string, string>();
  /** When refresh() last read the store, by this clock; null = never (the first reads every node). */
  private refreshedAtMs: number | null = null;
  /** When this process started listening for heartbeats (or, leading, since it took over: see restartSilenceClock). */
  private listeningSinceMs: number;
  /** Per node that joined while this process listened: when it joined. */
  private readonly joinedMs = new Map<string, number>();
  /** Since when buffered heartbeats have failed to reach the store; null = the last flush succeeded. */
  private unsavedSinceMs: number | null = null;

  private constructor(private readonly options: InventoryOptions) {
    this.listeningSinceMs = options.now();
  }

  /** Loads the fleet the store remembers, so a restarted control plane knows its nodes before the first heartbeat. */
  static async create(options: InventoryOptions): Promise<Inventory> {
    const inv = new Inventory(options);
    if (options.store) for (const row of await options.store.listNodes()) inv.nodes.set(row.id, fromRow(row));
    const interval = options.flushIntervalMs ?? 1000;
    if (options.store && interval > 0) {
      inv.flushTimer = setInterval(() => void inv.flush(), interval);
      inv.flushTimer.unref();
    }
    return inv;
  }

  /** Called when capacity may have changed (a join, a report that changes GPUs or disk, a state change). */
  onChange(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private changed(nodeId: string, why: string): void {
    for (const l of this.listeners) l(nodeId, why);
  }

  list(): Node[] {
    return [...this.nodes.values()].sort((a, b) => a.id.localeCompare(b.id));
  }

  get(id: string): Node | undefined {
    return this.nodes.get(id);
  }

  /**
   * Up while heartbeats are fresh; then stale, then lost. Silence counts
   * only while this process was there to hear: a control plane that was
   * down for ten minutes heard nothing, which says nothing of the nodes, so
   * after a restart each is given the whole lost window again (stale, so
   * nothing is placed on it or moved off it, until it reports). A node that
   * joined and has not sent its first heartbeat yet is stale, not lost.
   */
  liveness(node: Node, now = this.options.now()): Liveness {
    const seen = node.lastSeenMs;
    if (seen !== null && now - seen < this.options.staleAfterMs) return 'up';
    const silentSince = Math.max(seen ?? -Infinity, this.joinedMs.get(node.id) ?? -Infinity, this.listeningSinceMs);
    return now - silentSince < this.options.lostAfterMs ? 'stale' : 'lost';
  }

  /**
   * Counts silence from now, as after a restart: for an instance that takes
   * over the lead, whose view of heartbeats received elsewhere was only as
   * good as the store's while another led (heartbeats other instances hold
   * in their flush buffers, or could not write while the store was away).
   */
  restartSilenceClock(): void {
    this.listeningSinceMs = this.options.now();
  }

  /** Admits a node that presented the right join token; returns its new credential and management token. */
  async join(input: {
    id: string;
    hostname: string | null;
    mgmtAddr: string | null;
    labels: Record<string, string>;
    agentVersion: string | null;
    protocolVersion: number | null;
  }): Promise<{ credential: string; mgmtToken: string }> {
    const credential = randomBytes(32).toString('base64url');
    const mgmtToken = randomBytes(32).toString('base64url');
    const credentialHash = hashCredential(credential);
    const existing = this.nodes.get(input.id);
    this.joinedMs.set(input.id, this.options.now());
    const fields = { ...input, credentialHash, mgmtToken };
    if (this.options.store) {
      const row = await this.options.store.upsertNodeOnJoin(fields, {
        actor: `node:${input.id}`,
        action: existing ? 'node.rejoin' : 'node.join',
        target: input.id,
        detail: { hostname: input.hostname, labels: input.labels, agent_version: input.agentVersion },
      });
      const fresh = fromRow(row);
      // What this process heard more recently than the store wins.
      this.nodes.set(input.id, { ...fresh, report: existing?.report ?? fresh.report, lastSeenMs: existing?.lastSeenMs ?? fresh.lastSeenMs });
    } else {
      this.nodes.set(input.id, {
        adminState: existing?.adminState ?? 'ready',
        lastSeenMs: existing?.lastSeenMs ?? null,
        report: existing?.report ?? null,
        ...fields,
      });
    }
    this.changed(input.id, existing ? 'rejoined' : 'joined');
    return { credential, mgmtToken };
  }

  /** The node a credential belongs to, checked in constant time; null when it matches none. */
  authenticate(nodeId: string, credential: string): Node | null {
    const node = this.nodes.get(nodeId);
    if (!node) return null;
    const want = Buffer.from(node.credentialHash, 'hex');
    const got = Buffer.from(hashCredential(credential), 'hex');
    return want.length === got.length && timingSafeEqual(want, got) ? node : null;
  }

  /**
   * Records a heartbeat. The report is validated leniently (unknown fields
   * dropped); a report that does not parse at all keeps the previous one and
   * says so, rather than wiping what is known about the node.
   */
  heartbeat(node: Node, input: { report?: unknown; agentVersion?: string | null; protocolVersion?: number | null }): { reportProblem: string | null } {
    const now = this.options.now();
    const wasLive = this.liveness(node, now);
    // Not coming back: arriving (capacity to place on, not a recovery to tell of).
    const firstBeat = node.lastSeenMs === null;
    node.lastSeenMs = now;
    if (input.agentVersion !== undefined) node.agentVersion = input.agentVersion;
    if (input.protocolVersion !== undefined) node.protocolVersion = input.protocolVersion;
    let reportProblem: string | null = null;
    let capacityChanged = wasLive !== 'up';
    let reportChanged = false;
    if (input.report !== undefined) {
      const parsed = NodeReportSchema.safeParse(input.report);
      if (parsed.success) {
        const fingerprint = capacityFingerprint(parsed.data);
        reportChanged = this.fingerprints.get(node.id) !== fingerprint || node.report === null;
        capacityChanged ||= reportChanged;
        this.fingerprints.set(node.id, fingerprint);
        node.report = parsed.data;
      } else {
        reportProblem = `the report did not validate (${parsed.error.issues[0]?.message ?? 'unknown problem'}); the previous one is kept`;
      }
    }
    if (this.options.store) {
      // The report is rewritten only when what placement reads changed: at a
      // few hundred heartbeats a second, rewriting 3 KB each time was most of
      // the store's work for nothing a restarted control plane would miss.
      const previous = this.pending.get(node.id);
      const report = reportChanged ? node.report : previous?.report;
      this.pending.set(node.id, {
        lastSeenMs: now,
        ...(report !== undefined ? { report } : {}),
        agentVersion: node.agentVersion,
        protocolVersion: node.protocolVersion,
      });
      if ((this.options.flushIntervalMs ?? 1000) === 0) void this.flush();
    }
    if (capacityChanged) this.changed(node.id, firstBeat ? 'first heartbeat' : wasLive !== 'up' ? `back (${wasLive})` : 'capacity changed');
    return { reportProblem };
  }

  /** Writes buffered heartbeats to the store in one transaction. Safe to call at any time. */
  async flush(): Promise<void> {
    const store = this.options.store;
    if (!store || this.pending.size === 0) return this.flushing;
    const batch = [...this.pending.entries()].map(([id, b]) => ({ id, ...b }));
    this.pending = new Map();
    this.flushing = this.flushing
      .then(() => store.saveHeartbeats(batch))
      .then(
        () => {
          this.unsavedSinceMs = null;
        },
        () => {
          // The store is away: keep the newest of each so the next flush retries them.
          for (const b of batch) if (!this.pending.has(b.id)) this.pending.set(b.id, b);
          this.unsavedSinceMs ??= this.options.now();
        },
      );
    return this.flushing;
  }

  /**
   * How long heartbeats received here have failed to reach the store, ms; 0
   * when they reach it. With several control planes, only what is in the
   * store counts for the leader: a node heard only here looks silent there.
   */
  unsavedHeartbeatsMs(now = this.options.now()): number {
    return this.unsavedSinceMs === null ? 0 : now - this.unsavedSinceMs;
  }

  /**
   * Merges what other control planes on the same store wrote: nodes that
   * joined there, credentials from a rejoin there, admin states set there,
   * and heartbeats received there. Liveness is judged on the newest
   * heartbeat from any instance, so last_seen only moves forwards. One
   * instance alone never needs it (its memory is the newest).
   */
  async refresh(): Promise<void> {
    const store = this.options.store;
    if (!store) return;
    const now = this.options.now();
    // After the first, only rows changed lately: reading every node's report each second would cost
    // megabytes a second in a large fleet. The overlap covers clocks that differ between instances
    // and heartbeats another instance still holds in its flush buffer.
    const since = this.refreshedAtMs === null ? undefined : this.refreshedAtMs - REFRESH_OVERLAP_MS;
    const rows = await store.listNodes(since === undefined ? {} : { changedSinceMs: since });
    this.refreshedAtMs = now;
    for (const row of rows) {
      const fresh = fromRow(row);
      const node = this.nodes.get(row.id);
      if (!node) {
        this.nodes.set(row.id, fresh);
        this.joinedMs.set(row.id, now);
        if (fresh.report) this.fingerprints.set(row.id, capacityFingerprint(fresh.report));
        this.changed(row.id, 'joined through another control plane');
        continue;
      }
      node.hostname = fresh.hostname;
      node.mgmtAddr = fresh.mgmtAddr;
      node.labels = fresh.labels;
      node.credentialHash = fresh.credentialHash;
      node.mgmtToken = fresh.mgmtToken;
      if (fresh.adminState !== node.adminState) {
        const from = node.adminState;
        node.adminState = fresh.adminState;
        this.changed(row.id, `state ${from} -> ${fresh.adminState} (set through another control plane)`);
      }
      if (fresh.lastSeenMs === null || (node.lastSeenMs !== null && fresh.lastSeenMs <= node.lastSeenMs)) continue;
      const wasLive = this.liveness(node, now);
      node.lastSeenMs = fresh.lastSeenMs;
      // The stored report is rewritten only when capacity changed, so a differing one is news.
      const fingerprint = capacityFingerprint(fresh.report);
      const reportChanged = fresh.report !== null && this.fingerprints.get(row.id) !== fingerprint;
      if (reportChanged) {
        node.report = fresh.report;
        this.fingerprints.set(row.id, fingerprint);
      }
      if (wasLive !== this.liveness(node, now) || reportChanged) this.changed(row.id, reportChanged ? 'capacity changed (reported to another control plane)' : `back (${wasLive})`);
    }
  }

  async setState(id: string, state: AdminState, actor: string | AuditActor): Promise<Node> {
    const node = this.nodes.get(id);
    if (!node) throw new LlmgwError('LLMGW_NODE_NOT_FOUND', `no node "${id}"`);
    const from = node.adminState;
    if (this.options.store) {
      const ok = await this.options.store.setNodeState(id, state, { actor, action: 'node.state', target: id, detail: { from, to: state } });
      if (!ok) throw new LlmgwError('LLMGW_NODE_NOT_FOUND', `no node "${id}"`);
    }
    node.adminState = state;
    if (from !== state) this.changed(id, `state ${from} -> ${state}`);
    return node;
  }

  async close(): Promise<void> {
    if (this.flushTimer) clearInterval(this.flushTimer);
    await this.flush();
  }
}

/** GPUs that are healthy, as reported; unknown GPUs (no report) are none. */
export function healthyGpuIndices(node: Node): number[] {
  return (node.report?.gpus ?? []).filter((g) => g.problems.length === 0).map((g) => g.index);
}

/**
 * Free and total bytes over the node's local filesystems. Shared filesystems
 * are left out: the space on a filer is not this node's to spend, and adding
 * it would let twenty nodes each believe they have the same free terabyte.
 * Null when no local filesystem was reported (unknown, not full).
 */
export function localDisk(node: Node): DiskTotals | null {
  const local = (node.report?.disks ?? []).filter((d) => !d.shared && d.total_bytes !== undefined);
  if (local.length === 0) return null;
  return {
    freeBytes: local.reduce((s, d) => s + (d.free_bytes ?? 0), 0),
    totalBytes: local.reduce((s, d) => s + (d.total_bytes ?? 0), 0),
  };
}

export function fabricNames(node: Node): string[] {
  return [...new Set((node.report?.fabrics ?? []).map((f) => f.name))];
}

function fromRow(row: NodeRow): Node {
  const parsed = row.report === null ? null : NodeReportSchema.safeParse(row.report);
  return {
    id: row.id,
    hostname: row.hostname,
    mgmtAddr: row.mgmtAddr,
    labels: row.labels,
    adminState: (ADMIN_STATES as readonly string[]).includes(row.adminState) ? (row.adminState as AdminState) : 'ready',
    credentialHash: row.credentialHash,
    mgmtToken: row.mgmtToken,
    agentVersion: row.agentVersion,
    protocolVersion: row.protocolVersion,
    lastSeenMs: row.lastSeenMs,
    report: parsed?.success ? parsed.data : null,
  };
}

/** The parts of a report that placement reads; a change in any of them is worth a reconcile. */
function capacityFingerprint(report: NodeReport | null): string {
  if (!report) return '';
  const disks = (report.disks ?? []).map((d) => `${d.mount_point}:${d.shared}:${Math.round((d.free_bytes ?? 0) / 2 ** 30)}`);
  const gpus = (report.gpus ?? []).map((g) => `${g.index}:${g.class}:${g.problems.length}`);
  const weights = (report.weights ?? []).map((w) => w.cache_name ?? w.path);
  const engines = (report.engines ?? []).map((e) => e.name);
  return JSON.stringify([gpus, disks, weights, engines, report.memory_total_bytes, (report.fabrics ?? []).map((f) => f.name)]);
}
