// The inventory: what the control plane knows about its machines. Admin
// state (ready, cordoned, draining) is an operator's decision and persists;
// liveness (up, stale, lost) is derived from the last heartbeat and never
// stored as a state, so it cannot drift from the clock. Reports are kept as
// the agents sent them, read leniently: absent is unknown, never zero.
import { randomBytes } from 'node:crypto';
import { LlmgwError } from '../../errors/index.js';
import { type NodeReport, NodeReportSchema } from '../../protocol/index.js';
import type { AuditActor, HeartbeatWrite, JoinTokenRow, NodeRow, Store } from '../store/index.js';
import { actorText } from '../../http/index.js';
import {
  constantTimeEqual,
  deriveMgmtToken,
  hardwareFingerprint,
  matchesHash,
  mgmtKey,
  newNodeJoinToken,
  newNonce,
  sha256Hex,
} from './node-secrets.js';

export type AdminState = 'ready' | 'cordoned' | 'draining';
export type Liveness = 'up' | 'stale' | 'lost';
export const ADMIN_STATES: readonly AdminState[] = ['ready', 'cordoned', 'draining'];
/** Pending: held out of placement until an admin approves it (join_approval: manual, or its hardware changed). */
export type Approval = 'approved' | 'pending';
export type JoinApproval = 'auto' | 'manual';

export interface Node {
  readonly id: string;
  hostname: string | null;
  mgmtAddr: string | null;
  labels: Record<string, string>;
  adminState: AdminState;
  credentialHash: string;
  /** The nonce the management token is derived from; null = none yet (the next heartbeat issues one). */
  mgmtNonce: string | null;
  mgmtTokenHash: string | null;
  /** What the control plane presents to the agent's management API, derived; '' = not known until the next heartbeat issues one. */
  mgmtToken: string;
  approval: Approval;
  /** The GPUs the node was approved with (hardwareFingerprint); null = none reported yet. */
  approvedHardware: string | null;
  /** What changed in its GPUs since approval, in words; null = nothing. Cleared by an approval. */
  hardwareChange: string | null;
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
  /**
   * The least time between two writes of one node's last_seen, ms: between
   * them the newest heartbeat is kept in memory only. A changed report is
   * written at the next flush regardless. 0 or absent = every heartbeat is
   * written. With several control planes it must leave the leader's view of
   * last_seen inside the stale window (see control-plane.ts).
   */
  lastSeenWriteMs?: number;
  /**
   * How much older a last_seen read from the store may be than the node's
   * newest heartbeat at the instance that heard it, ms: that instance's write
   * throttle, its flush and this one's sync. A node heard only through the
   * store is judged stale or lost that much later, so an agent that fails
   * over between control planes inside its own window is never called stale
   * for the store's delay. 0 or absent = one instance, nothing lags.
   */
  storeLagMs?: number;
  /** The fleet's shared join token: the key management tokens are derived from. Absent or null: joining is closed. */
  joinToken?: string | null;
  /** manual: nodes that join afresh wait as pending until approved, and a hardware change holds a node out again. Absent = auto. */
  joinApproval?: JoinApproval;
}

/** Who vouches for a join beyond the shared join token. */
export interface JoinProof {
  /** The credential the agent saved from its previous join; null = none (a fresh agent). */
  previousCredential: string | null;
  /** True when a per-node join token for this id was used: an admin's act, which may replace a live node's credential. */
  nodeToken: boolean;
}

/** How a heartbeat spoke of the node's report: sent in full, or named by its hash only (a keep-alive). */
export type HeartbeatReportKind = 'full' | 'keepalive';

/** Counts since this process started, for /metrics. */
export interface HeartbeatCounts {
  /** Heartbeats by how they carried the report; one with neither report nor hash counts as a keep-alive. */
  reports: Record<HeartbeatReportKind, number>;
  /** Keep-alives answered with send_report: the hash named was not the one held. */
  reportsAsked: number;
  /** Node rows written to the store by heartbeat flushes (last_seen, and the report when it changed). */
  storeNodeWrites: number;
}

export type NodeEventListener = (event: {
  kind: 'node_hardware_changed' | 'node_removed' | 'node_approved' | 'node_pending';
  node: string;
  message: string;
}) => void;

export interface DiskTotals {
  freeBytes: number;
  totalBytes: number;
}

type Listener = (nodeId: string, why: string) => void;

/** How far back each refresh() looks again, ms: a few flush intervals plus clock skew between instances. */
const REFRESH_OVERLAP_MS = 10_000;

export class Inventory {
  private readonly nodes = new Map<string, Node>();
  /** The nodes by id, as list() gives them; null = to be made again (a node joined, was replaced or left). */
  private sorted: Node[] | null = null;
  private pending = new Map<string, PendingWrite>();
  private flushTimer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> = Promise.resolve();
  private readonly listeners = new Set<Listener>();
  /** Per node, the capacity fingerprint of its newest report: computed once per report, not twice. */
  private readonly fingerprints = new Map<string, string>();
  /** When refresh() last read changed rows from the store, by this clock; null = never (the first reads every node). */
  private rowsReadAtMs: number | null = null;
  /** When refresh() last read the heartbeats other instances saved; null = not since the first read (which has them). */
  private seenReadAtMs: number | null = null;
  /**
   * Per node, the version of its row merged here; absent = not read whole
   * since (a refresh reads it). A row in a refresh's look-back window whose
   * version is this one holds nothing new and is not read again.
   */
  private readonly mergedVersions = new Map<string, number>();
  /** When this process started listening for heartbeats (or, leading, since it took over: see restartSilenceClock). */
  private listeningSinceMs: number;
  /** Per node: when it last joined, here or (as the store says) through another control plane; silence counts from here at the earliest. */
  private readonly joinedMs = new Map<string, number>();
  /** Nodes whose newest last_seen is a heartbeat this instance heard; the others' came through the store (see storeLagMs). */
  private readonly heardHere = new Set<string>();
  /** Since when buffered heartbeats have failed to reach the store; null = the last flush succeeded. */
  private unsavedSinceMs: number | null = null;
  /**
   * Per node, the agent's hash of the report held here; absent = none known
   * (an older agent, a report heard only through the store, or not heard
   * since this process started), so a keep-alive is answered send_report.
   */
  private readonly reportHashes = new Map<string, string>();
  /** Per node, when its last_seen was last queued for the store. */
  private readonly queuedAt = new Map<string, number>();
  /** Per node, the credential last proven and the hash it matched; held in memory only, never stored or logged. */
  private readonly provenCredentials = new Map<string, { hash: string; credential: string }>();
  readonly counts: HeartbeatCounts = { reports: { full: 0, keepalive: 0 }, reportsAsked: 0, storeNodeWrites: 0 };

  private readonly mgmtKey: Buffer;
  private readonly eventListeners = new Set<NodeEventListener>();
  /** Per-node join tokens when there is no store (`store: none`): by hash. */
  private readonly memoryJoinTokens = new Map<string, JoinTokenRow>();

  private constructor(private readonly options: InventoryOptions) {
    this.listeningSinceMs = options.now();
    this.mgmtKey = mgmtKey(options.joinToken ?? null);
  }

  get joinApproval(): JoinApproval {
    return this.options.joinApproval ?? 'auto';
  }

  /** Identity events worth the events log: a hardware change, a removal, an approval. */
  onNodeEvent(listener: NodeEventListener): () => void {
    this.eventListeners.add(listener);
    return () => this.eventListeners.delete(listener);
  }

  private nodeEvent(kind: Parameters<NodeEventListener>[0]['kind'], node: string, message: string): void {
    for (const l of this.eventListeners) l({ kind, node, message });
  }

  private fromRow(row: NodeRow): Node {
    return fromRow(row, this.mgmtKey);
  }

  /** Loads the fleet the store remembers, so a restarted control plane knows its nodes before the first heartbeat. */
  static async create(options: InventoryOptions): Promise<Inventory> {
    const inv = new Inventory(options);
    if (options.store)
      for (const row of await options.store.nodes.list()) if (row.removedAtMs === null) inv.put(inv.fromRow(row));
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

  /**
   * Every node, by id. Kept sorted between joins and removals: passes, views
   * and metrics read it several times a second, and sorting 10,000 ids each
   * time cost more than the pass's own work on them. Shared: not to be changed.
   */
  list(): readonly Node[] {
    this.sorted ??= [...this.nodes.values()].sort((a, b) => a.id.localeCompare(b.id));
    return this.sorted;
  }

  /** Adds or replaces a node; the sorted list is made again at the next list(). */
  private put(node: Node): void {
    this.nodes.set(node.id, node);
    this.sorted = null;
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
    const lag = this.heardHere.has(node.id) ? 0 : (this.options.storeLagMs ?? 0);
    if (seen !== null && now - seen < this.options.staleAfterMs + lag) return 'up';
    const silentSince = Math.max(seen ?? -Infinity, this.joinedMs.get(node.id) ?? -Infinity, this.listeningSinceMs);
    return now - silentSince < this.options.lostAfterMs + lag ? 'stale' : 'lost';
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

  /**
   * Admits a node that presented a valid join token; returns its new
   * credential and management token. A node id is bound to its credential:
   * while the node is live (up or stale) only a join that proves the
   * current credential, or one made with a per-node join token, may take
   * the id; otherwise the join is refused and the live node keeps its
   * credential, assignments and management address. A removed or lost node
   * frees its id.
   */
  async join(
    input: {
      id: string;
      hostname: string | null;
      mgmtAddr: string | null;
      labels: Record<string, string>;
      agentVersion: string | null;
      protocolVersion: number | null;
    },
    proof: JoinProof = { previousCredential: null, nodeToken: false },
  ): Promise<{ credential: string; mgmtToken: string }> {
    const existing = await this.current(input.id);
    // What the decision below rests on; a join that changed it meanwhile wins, and this one is refused.
    const decidedOn = existing?.credentialHash ?? null;
    const proven =
      existing !== undefined &&
      proof.previousCredential !== null &&
      matchesHash(proof.previousCredential, existing.credentialHash);
    if (existing && !proven && !proof.nodeToken) {
      const live = this.liveness(existing);
      if (live !== 'lost') throw idTaken(existing, live, this.options.now(), this.options.lostAfterMs);
    }
    const credential = randomBytes(32).toString('base64url');
    const credentialHash = sha256Hex(credential);
    const mgmtNonce = newNonce();
    const mgmtToken = deriveMgmtToken(this.mgmtKey, input.id, mgmtNonce);
    const manual = this.joinApproval === 'manual';
    // Another machine taking a lost node's id, with manual approval, is a new machine to the operator.
    const approval: Approval | undefined = existing && !proven && !proof.nodeToken && manual ? 'pending' : undefined;
    const approvalIfNew: Approval = manual ? 'pending' : 'approved';
    this.joinedMs.set(input.id, this.options.now());
    const action = !existing
      ? 'node.join'
      : proven
        ? 'node.rejoin'
        : proof.nodeToken
          ? 'node.rejoin_with_node_token'
          : 'node.rejoin_after_lost';
    if (this.options.store) {
      const row = await this.options.store.nodes.upsertOnJoin(
        {
          ...input,
          credentialHash,
          mgmtNonce,
          mgmtTokenHash: sha256Hex(mgmtToken),
          approvalIfNew,
          expectCredentialHash: decidedOn,
          ...(approval ? { approval } : {}),
        },
        {
          actor: `node:${input.id}`,
          action,
          target: input.id,
          detail: { hostname: input.hostname, labels: input.labels, agent_version: input.agentVersion },
        },
      );
      const fresh = this.fromRow(row);
      // What this process heard more recently than the store wins.
      this.put({
        ...fresh,
        report: existing?.report ?? fresh.report,
        lastSeenMs: existing?.lastSeenMs ?? fresh.lastSeenMs,
      });
    } else {
      if ((this.nodes.get(input.id)?.credentialHash ?? null) !== decidedOn) {
        throw new LlmgwError(
          'LLMGW_NODE_ID_TAKEN',
          `node id "${input.id}" was taken by another join at the same moment; this join was refused, and the agent retries`,
        );
      }
      this.put({
        adminState: existing?.adminState ?? 'ready',
        lastSeenMs: existing?.lastSeenMs ?? null,
        report: existing?.report ?? null,
        approval: approval ?? existing?.approval ?? approvalIfNew,
        approvedHardware: existing?.approvedHardware ?? null,
        hardwareChange: existing?.hardwareChange ?? null,
        ...input,
        credentialHash,
        mgmtNonce,
        mgmtTokenHash: sha256Hex(mgmtToken),
        mgmtToken,
      });
    }
    this.changed(input.id, existing ? 'rejoined' : 'joined');
    if (!existing && manual)
      this.nodeEvent(
        'node_pending',
        input.id,
        `node ${input.id} joined and waits for approval (join_approval: manual): llmgw ctl nodes approve ${input.id}`,
      );
    return { credential, mgmtToken };
  }

  /**
   * The node under this id as the fleet knows it now: with a store, the
   * stored row decides whether it exists (another control plane may have
   * removed it or admitted it), merged with what this process heard.
   */
  private async current(id: string): Promise<Node | undefined> {
    const store = this.options.store;
    const mine = this.nodes.get(id);
    if (!store) return mine;
    const row = await store.nodes.get(id);
    if (!row || row.removedAtMs !== null) {
      if (mine) this.forget(id);
      return undefined;
    }
    // A node that joined through another control plane and has not sent a heartbeat yet
    // is live from its join, not lost because this process has listened longer than node_lost_after.
    this.heardJoin(id, row.joinedAt);
    if (!mine) {
      const fresh = this.fromRow(row);
      this.put(fresh);
      return fresh;
    }
    mine.credentialHash = row.credentialHash;
    if (row.lastSeenMs !== null && (mine.lastSeenMs === null || row.lastSeenMs > mine.lastSeenMs)) {
      mine.lastSeenMs = row.lastSeenMs;
      this.heardHere.delete(id);
    }
    return mine;
  }

  /** Records a join time read from the store, keeping the later of it and the one known here. */
  private heardJoin(id: string, joinedAtMs: number): void {
    const known = this.joinedMs.get(id);
    if (known === undefined || joinedAtMs > known) this.joinedMs.set(id, joinedAtMs);
  }

  private forget(id: string): void {
    this.nodes.delete(id);
    this.sorted = null;
    this.pending.delete(id);
    this.fingerprints.delete(id);
    this.joinedMs.delete(id);
    this.heardHere.delete(id);
    this.reportHashes.delete(id);
    this.queuedAt.delete(id);
    this.provenCredentials.delete(id);
  }

  /** The agent's hash of the report held for this node; null = none held (the agent's next heartbeat sends its report). */
  reportHashOf(id: string): string | null {
    return this.reportHashes.get(id) ?? null;
  }

  /**
   * The node a credential belongs to, checked in constant time; null when it
   * matches none. The credential last proven for a node is remembered with
   * the hash it matched, so the next heartbeat is a string comparison rather
   * than a SHA-256 (at 2,000 heartbeats a second that was a twentieth of the
   * control plane's time); a new hash (a rejoin here or elsewhere, a
   * removal) makes it worthless at once.
   */
  authenticate(nodeId: string, credential: string): Node | null {
    const node = this.nodes.get(nodeId);
    if (!node) return null;
    const proven = this.provenCredentials.get(nodeId);
    if (proven !== undefined && proven.hash === node.credentialHash)
      return constantTimeEqual(proven.credential, credential) ? node : null;
    if (!matchesHash(credential, node.credentialHash)) return null;
    this.provenCredentials.set(nodeId, { hash: node.credentialHash, credential });
    return node;
  }

  /**
   * Records a heartbeat. The report is validated leniently (unknown fields
   * dropped); a report that does not parse at all keeps the previous one and
   * says so, rather than wiping what is known about the node. A heartbeat
   * with a report hash and no report is a keep-alive: when the hash is the
   * one held, nothing is parsed or stored beyond liveness; when it is not,
   * `sendReport` asks the agent for its full report, and the report held
   * meanwhile stays as it was.
   */
  heartbeat(
    node: Node,
    input: { report?: unknown; reportHash?: string; agentVersion?: string | null; protocolVersion?: number | null },
  ): { reportProblem: string | null; mgmtToken: string; sendReport: boolean } {
    const now = this.options.now();
    const wasLive = this.liveness(node, now);
    // Not coming back: arriving (capacity to place on, not a recovery to tell of).
    const firstBeat = node.lastSeenMs === null;
    node.lastSeenMs = now;
    this.heardHere.add(node.id);
    const versionsChanged =
      (input.agentVersion !== undefined && input.agentVersion !== node.agentVersion) ||
      (input.protocolVersion !== undefined && input.protocolVersion !== node.protocolVersion);
    if (input.agentVersion !== undefined) node.agentVersion = input.agentVersion;
    if (input.protocolVersion !== undefined) node.protocolVersion = input.protocolVersion;
    let reportProblem: string | null = null;
    let capacityChanged = wasLive !== 'up';
    let reportChanged = false;
    let sendReport = false;
    let firstHardware: string | undefined;
    if (input.report === undefined) {
      this.counts.reports.keepalive++;
      if (input.reportHash !== undefined && this.reportHashes.get(node.id) !== input.reportHash) {
        sendReport = true;
        this.counts.reportsAsked++;
      }
    } else {
      this.counts.reports.full++;
      const parsed = NodeReportSchema.safeParse(input.report);
      // A report that did not parse is not held under its hash: the next keep-alive asks for it again.
      if (parsed.success && input.reportHash !== undefined) this.reportHashes.set(node.id, input.reportHash);
      else this.reportHashes.delete(node.id);
      if (parsed.success) {
        const fingerprint = capacityFingerprint(parsed.data);
        reportChanged = this.fingerprints.get(node.id) !== fingerprint || node.report === null;
        capacityChanged ||= reportChanged;
        this.fingerprints.set(node.id, fingerprint);
        node.report = parsed.data;
        const hardware = this.checkHardware(node);
        if (hardware.held) capacityChanged = true;
        firstHardware = hardware.first;
      } else {
        reportProblem = `the report did not validate (${parsed.error.issues[0]?.message ?? 'unknown problem'}); the previous one is kept`;
      }
    }
    if (this.options.store)
      this.queueWrite(node, now, {
        reportChanged,
        versionsChanged,
        ...(firstHardware !== undefined ? { firstHardware } : {}),
      });
    if (capacityChanged)
      this.changed(
        node.id,
        firstBeat ? 'first heartbeat' : wasLive !== 'up' ? `back (${wasLive})` : 'capacity changed',
      );
    return { reportProblem, mgmtToken: this.ensureMgmtToken(node), sendReport };
  }

  /**
   * Queues the node's heartbeat for the next flush, unless its last_seen was
   * queued less than lastSeenWriteMs ago and nothing else changed: at 10,000
   * nodes, writing every heartbeat is 2,000 row writes a second for a value
   * only a restarted or another control plane reads.
   */
  private queueWrite(
    node: Node,
    now: number,
    changed: { reportChanged: boolean; versionsChanged: boolean; firstHardware?: string },
  ): void {
    const { reportChanged, versionsChanged, firstHardware } = changed;
    // The report is rewritten only when what placement reads changed: at a
    // few hundred heartbeats a second, rewriting 3 KB each time was most of
    // the store's work for nothing a restarted control plane would miss.
    const previous = this.pending.get(node.id);
    const queued = this.queuedAt.get(node.id);
    const due =
      reportChanged ||
      versionsChanged ||
      firstHardware !== undefined ||
      previous !== undefined ||
      queued === undefined ||
      now - queued >= (this.options.lastSeenWriteMs ?? 0);
    if (!due) return;
    // What an earlier heartbeat in this flush changed is still to be written.
    const write: PendingWrite = {
      lastSeenMs: now,
      ...(reportChanged ? { report: node.report } : {}),
      ...(versionsChanged
        ? { versions: { agentVersion: node.agentVersion, protocolVersion: node.protocolVersion } }
        : {}),
      ...(firstHardware !== undefined ? { approvedHardware: firstHardware } : {}),
    };
    this.pending.set(node.id, previous ? mergeWrites(write, previous) : write);
    this.queuedAt.set(node.id, now);
    if ((this.options.flushIntervalMs ?? 1000) === 0) void this.flush();
  }

  /**
   * The node's management token, issuing a new one when none is known: a
   * row migrated from a plaintext token, or a join token rotated since it
   * was derived (the derived value no longer matches the stored hash). The
   * heartbeat answer carries it, so the agent takes the new one at once.
   */
  private ensureMgmtToken(node: Node): string {
    if (node.mgmtToken) return node.mgmtToken;
    const nonce = newNonce();
    const token = deriveMgmtToken(this.mgmtKey, node.id, nonce);
    node.mgmtNonce = nonce;
    node.mgmtTokenHash = sha256Hex(token);
    node.mgmtToken = token;
    // Not awaited: a heartbeat never waits on the store. Should the write fail, the next instance to
    // load the row finds no match and issues another; the agent takes whichever answer it gets last.
    void this.options.store?.nodes.setMgmtToken(node.id, nonce, node.mgmtTokenHash).catch(() => {});
    return token;
  }

  /**
   * Compares the node's reported GPUs with those it was approved with. The
   * first report sets them (`first`: to be saved with the heartbeat, not in
   * a transaction of its own: a fleet's first reports come thousands at
   * once); a change is flagged (kept until an admin approves) and, with
   * manual approval, holds the node out of placement (`held`).
   */
  private checkHardware(node: Node): { held: boolean; first?: string } {
    const now = reportedHardware(node);
    if (now === null) return { held: false };
    if (node.approvedHardware === null) {
      node.approvedHardware = now;
      return { held: false, first: now };
    }
    const change = now === node.approvedHardware ? null : `GPUs changed from ${node.approvedHardware} to ${now}`;
    if (change === node.hardwareChange || change === null) return { held: false };
    node.hardwareChange = change;
    const hold = this.joinApproval === 'manual' && node.approval === 'approved';
    if (hold) node.approval = 'pending';
    void this.options.store?.nodes
      .setApproval(
        node.id,
        { approval: node.approval, approvedHardware: node.approvedHardware, hardwareChange: change },
        null,
      )
      .catch(() => {});
    this.nodeEvent(
      'node_hardware_changed',
      node.id,
      `node ${node.id}: ${change}${hold ? '; it takes no new replicas until approved' : ''} (llmgw ctl nodes approve ${node.id} accepts it)`,
    );
    return { held: hold };
  }

  /** Approves a pending node and accepts the hardware it reports now. */
  async approve(id: string, actor: string | AuditActor): Promise<Node> {
    const node = this.nodes.get(id);
    if (!node) throw new LlmgwError('LLMGW_NODE_NOT_FOUND', `no node "${id}"; llmgw ctl nodes lists the fleet`);
    const hardware = reportedHardware(node) ?? node.approvedHardware;
    const fields = { approval: 'approved' as const, approvedHardware: hardware, hardwareChange: null };
    if (this.options.store) {
      const ok = await this.options.store.nodes.setApproval(id, fields, {
        actor,
        action: 'node.approve',
        target: id,
        detail: { from: node.approval, hardware },
      });
      if (!ok) throw new LlmgwError('LLMGW_NODE_NOT_FOUND', `no node "${id}"`);
    }
    const was = node.approval;
    Object.assign(node, fields);
    if (was !== 'approved') {
      this.nodeEvent('node_approved', id, `node ${id} was approved by ${actorText(actor)}`);
      this.changed(id, 'approved');
    }
    return node;
  }

  /**
   * Removes a node: its credential stops working at once, its id is free to
   * join again, and the reconciler replaces its replicas as it would a lost
   * node's. The caller decides whether a node with replicas may go.
   */
  async remove(id: string, actor: string | AuditActor, detail: Record<string, unknown> = {}): Promise<void> {
    if (!this.nodes.has(id))
      throw new LlmgwError('LLMGW_NODE_NOT_FOUND', `no node "${id}"; llmgw ctl nodes lists the fleet`);
    if (this.options.store) {
      const ok = await this.options.store.nodes.remove(id, { actor, action: 'node.remove', target: id, detail });
      if (!ok) throw new LlmgwError('LLMGW_NODE_NOT_FOUND', `no node "${id}"`);
    }
    this.forget(id);
    this.nodeEvent('node_removed', id, `node ${id} was removed by ${actorText(actor)}; its id is free to join again`);
    this.changed(id, 'removed');
  }

  /** Creates a single-use join token that admits only `nodeId`, until `expiresAtMs`; returns the secret (shown once). */
  async createJoinToken(
    nodeId: string,
    expiresAtMs: number,
    actor: string | AuditActor,
  ): Promise<{ token: string; row: JoinTokenRow }> {
    const token = newNodeJoinToken();
    const hash = sha256Hex(token);
    const id = `jt-${hash.slice(0, 12)}`;
    const input = { id, node: nodeId, hash, expiresAtMs, createdBy: actorText(actor) };
    if (this.options.store) {
      const row = await this.options.store.joinTokens.create(input, {
        actor,
        action: 'join_token.create',
        target: nodeId,
        detail: { id, expires_at: expiresAtMs },
      });
      return { token, row };
    }
    const row: JoinTokenRow = {
      id,
      node: nodeId,
      expiresAtMs,
      createdAtMs: this.options.now(),
      createdBy: actorText(actor),
      usedAtMs: null,
    };
    this.memoryJoinTokens.set(hash, row);
    return { token, row };
  }

  async listJoinTokens(): Promise<JoinTokenRow[]> {
    if (this.options.store) return this.options.store.joinTokens.list();
    return [...this.memoryJoinTokens.values()].sort((a, b) => b.createdAtMs - a.createdAtMs);
  }

  /** Uses up a per-node join token for this node id; false when it is unknown, used, expired or for another node. */
  async consumeJoinToken(token: string, nodeId: string): Promise<boolean> {
    const hash = sha256Hex(token);
    const now = this.options.now();
    if (this.options.store) return (await this.options.store.joinTokens.consume(hash, nodeId, now)) !== null;
    const row = this.memoryJoinTokens.get(hash);
    if (!row || row.node !== nodeId || row.usedAtMs !== null || row.expiresAtMs <= now) return false;
    row.usedAtMs = now;
    return true;
  }

  /** Writes buffered heartbeats to the store in one transaction. Safe to call at any time. */
  async flush(): Promise<void> {
    const store = this.options.store;
    if (!store || this.pending.size === 0) return this.flushing;
    const batch = [...this.pending.entries()].map(([id, b]) => ({ id, ...b }));
    this.pending = new Map();
    this.flushing = this.flushing
      .then(() => store.nodes.saveHeartbeats(batch))
      .then(
        () => {
          this.unsavedSinceMs = null;
          this.counts.storeNodeWrites += batch.length;
        },
        () => {
          // The store is away: the next flush retries them, merged with what was queued since
          // (its newer last_seen, and a report or versions only this batch carried).
          for (const { id, ...b } of batch) {
            const later = this.pending.get(id);
            this.pending.set(id, later ? mergeWrites(later, b) : b);
          }
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
   * instance alone never needs it (its memory is the newest). `liveness:
   * false` reads changed rows only: for a NOTIFY that rows changed, which
   * comes many times a second while a fleet reports; the heartbeats are
   * read at the periodic sync.
   */
  async refresh(options: { liveness?: boolean } = {}): Promise<void> {
    const store = this.options.store;
    if (!store) return;
    const now = this.options.now();
    // After the first, only what changed lately: the ids and versions of rows written in the
    // look-back window, then whole only those whose version is not the one merged here (a row is
    // read once per change, not at every look while it stays in the window); and apart from them
    // the last_seen values saved lately, a few bytes a node. The overlap covers clocks that differ
    // between instances and heartbeats another instance still holds in its flush buffer.
    let rows: NodeRow[];
    // The first read takes whole rows, their last_seen with them.
    const readAt = this.rowsReadAtMs;
    const first = readAt === null;
    if (first) {
      rows = await store.nodes.list();
      this.seenReadAtMs = now;
    } else {
      const versions = await store.nodes.versionsSince(readAt - REFRESH_OVERLAP_MS);
      const moved = versions.filter((v) => this.mergedVersions.get(v.id) !== v.version).map((v) => v.id);
      rows = moved.length === 0 ? [] : await store.nodes.rowsById(moved);
    }
    this.rowsReadAtMs = now;
    for (const row of rows) this.mergeRow(row, now);
    if (options.liveness === false || first) return;
    const seen = await store.nodes.lastSeenSince((this.seenReadAtMs ?? now) - REFRESH_OVERLAP_MS);
    this.seenReadAtMs = now;
    for (const { id, lastSeenMs } of seen) {
      const node = this.nodes.get(id);
      if (node) this.mergeLastSeen(node, lastSeenMs, now, false);
    }
  }

  /** One node's row as another control plane left it: identity, credentials, admin state, approval, its report. */
  private mergeRow(row: NodeRow, now: number): void {
    this.mergedVersions.set(row.id, row.version);
    const node = this.nodes.get(row.id);
    if (row.removedAtMs !== null) {
      if (node) {
        this.forget(row.id);
        this.changed(row.id, 'removed through another control plane');
      }
      return;
    }
    const fresh = this.fromRow(row);
    if (!node) {
      this.put(fresh);
      this.joinedMs.set(row.id, now);
      if (fresh.report) this.fingerprints.set(row.id, capacityFingerprint(fresh.report));
      this.changed(row.id, 'joined through another control plane');
      return;
    }
    this.heardJoin(row.id, row.joinedAt);
    node.hostname = fresh.hostname;
    node.mgmtAddr = fresh.mgmtAddr;
    // The same object while the labels are the same: a pass converts a node again when its labels object changes.
    if (JSON.stringify(fresh.labels) !== JSON.stringify(node.labels)) node.labels = fresh.labels;
    node.credentialHash = fresh.credentialHash;
    if (fresh.mgmtNonce !== node.mgmtNonce) {
      node.mgmtNonce = fresh.mgmtNonce;
      node.mgmtTokenHash = fresh.mgmtTokenHash;
      node.mgmtToken = fresh.mgmtToken;
    }
    node.approvedHardware = fresh.approvedHardware;
    node.hardwareChange = fresh.hardwareChange;
    if (fresh.approval !== node.approval) {
      node.approval = fresh.approval;
      this.changed(row.id, `approval ${fresh.approval} (set through another control plane)`);
    }
    if (fresh.adminState !== node.adminState) {
      const from = node.adminState;
      node.adminState = fresh.adminState;
      this.changed(row.id, `state ${from} -> ${fresh.adminState} (set through another control plane)`);
    }
    if (fresh.lastSeenMs !== null) this.mergeLastSeen(node, fresh.lastSeenMs, now, true, fresh.report);
  }

  /**
   * A heartbeat another control plane saved. Liveness is judged on the
   * newest from any instance, so last_seen only moves forwards; the report
   * saved with it is taken only when it is newer than what this process
   * heard (`withReport`: the row was read whole, report included).
   */
  private mergeLastSeen(
    node: Node,
    lastSeenMs: number,
    now: number,
    withReport: boolean,
    report: NodeReport | null = null,
  ): void {
    if (node.lastSeenMs !== null && lastSeenMs <= node.lastSeenMs) return;
    const wasLive = this.liveness(node, now);
    node.lastSeenMs = lastSeenMs;
    this.heardHere.delete(node.id);
    // The stored report is rewritten only when capacity changed, so a differing one is news.
    const fingerprint = withReport ? capacityFingerprint(report) : '';
    const reportChanged = withReport && report !== null && this.fingerprints.get(node.id) !== fingerprint;
    if (reportChanged) {
      node.report = report;
      this.fingerprints.set(node.id, fingerprint);
      // Reported to another instance: the hash held here names the report just replaced.
      this.reportHashes.delete(node.id);
    }
    if (wasLive !== this.liveness(node, now) || reportChanged)
      this.changed(
        node.id,
        reportChanged ? 'capacity changed (reported to another control plane)' : `back (${wasLive})`,
      );
  }

  async setState(id: string, state: AdminState, actor: string | AuditActor): Promise<Node> {
    const node = this.nodes.get(id);
    if (!node) throw new LlmgwError('LLMGW_NODE_NOT_FOUND', `no node "${id}"`);
    const from = node.adminState;
    if (this.options.store) {
      const ok = await this.options.store.nodes.setState(id, state, {
        actor,
        action: 'node.state',
        target: id,
        detail: { from, to: state },
      });
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

/** A node's heartbeat waiting for the next flush. */
type PendingWrite = Omit<HeartbeatWrite, 'id'>;

/** Two queued writes of one node as one: the newer's last_seen, and each change from the newer where it has one, else the older's. */
function mergeWrites(newer: PendingWrite, older: PendingWrite): PendingWrite {
  const report = newer.report !== undefined ? newer.report : older.report;
  const versions = newer.versions ?? older.versions;
  const approvedHardware = newer.approvedHardware ?? older.approvedHardware;
  return {
    lastSeenMs: newer.lastSeenMs,
    ...(report !== undefined ? { report } : {}),
    ...(versions !== undefined ? { versions } : {}),
    ...(approvedHardware !== undefined ? { approvedHardware } : {}),
  };
}

function fromRow(row: NodeRow, key: Buffer): Node {
  const parsed = row.report === null ? null : NodeReportSchema.safeParse(row.report);
  // A token that no longer matches its hash was derived from another join token: unknown until re-issued.
  const derived = row.mgmtNonce === null ? '' : deriveMgmtToken(key, row.id, row.mgmtNonce);
  const mgmtToken = derived && matchesHash(derived, row.mgmtTokenHash) ? derived : '';
  return {
    id: row.id,
    hostname: row.hostname,
    mgmtAddr: row.mgmtAddr,
    labels: row.labels,
    adminState: (ADMIN_STATES as readonly string[]).includes(row.adminState) ? (row.adminState as AdminState) : 'ready',
    credentialHash: row.credentialHash,
    mgmtNonce: row.mgmtNonce,
    mgmtTokenHash: row.mgmtTokenHash,
    mgmtToken,
    approval: row.approval === 'pending' ? 'pending' : 'approved',
    approvedHardware: row.approvedHardware,
    hardwareChange: row.hardwareChange,
    agentVersion: row.agentVersion,
    protocolVersion: row.protocolVersion,
    lastSeenMs: row.lastSeenMs,
    report: parsed?.success ? parsed.data : null,
  };
}

/** The parts of a report that placement reads; a change in any of them is worth a reconcile. */
function capacityFingerprint(report: NodeReport | null): string {
  if (!report) return '';
  const disks = (report.disks ?? []).map(
    (d) => `${d.mount_point}:${d.shared}:${Math.round((d.free_bytes ?? 0) / 2 ** 30)}`,
  );
  const gpus = (report.gpus ?? []).map((g) => `${g.index}:${g.class}:${g.problems.length}`);
  const weights = (report.weights ?? []).map((w) => w.cache_name ?? w.path);
  const engines = (report.engines ?? []).map((e) => e.name);
  return JSON.stringify([
    gpus,
    disks,
    weights,
    engines,
    report.memory_total_bytes,
    (report.fabrics ?? []).map((f) => f.name),
  ]);
}

/** The node's GPUs as its report tells them; null = unknown (no report, none said, or the GPU probe failed: not a change). */
function reportedHardware(node: Node): string | null {
  return node.report?.gpu_probe_error ? null : hardwareFingerprint(node.report?.gpus);
}

/** The refusal of a join under a live node's id: what happened and the three ways out. */
function idTaken(node: Node, live: Liveness, nowMs: number, lostAfterMs: number): LlmgwError {
  const heard =
    node.lastSeenMs === null
      ? 'has not sent a heartbeat yet'
      : `last sent a heartbeat ${Math.round((nowMs - node.lastSeenMs) / 1000)} s ago`;
  return new LlmgwError(
    'LLMGW_NODE_ID_TAKEN',
    `node id "${node.id}" belongs to a node that is ${live} (it ${heard}), and this join did not prove that node's credential, so it was refused. ` +
      `If this is that machine and its state directory was lost, ask an admin for a per-node join token (llmgw ctl join-token create --node ${node.id}); ` +
      `if the old node is gone, an admin can remove it (llmgw ctl nodes rm ${node.id}), or it frees its id after ${Math.round(lostAfterMs / 1000)} s of silence (node_lost_after); ` +
      `if this is another machine, give it its own --node-id`,
    { context: { node: node.id, liveness: live } },
  );
}
