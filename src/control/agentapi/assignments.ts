// What each node should run, with a generation per node so a heartbeat can
// long-poll: the agent says which generation it has, and the answer waits
// until there is a newer one (or the wait runs out). The reconciler writes
// here; the agent API reads. Kept in memory: after a restart the reconciler
// rebuilds it from the store in its first pass.
import type { ShardAssignment } from '../../protocol/index.js';

interface NodeBoard {
  generation: number;
  shards: ShardAssignment[];
  /** `shards` as JSON, kept from the last comparison that needed it; undefined = not made yet. */
  json?: string | undefined;
  waiters: Set<() => void>;
}

/**
 * How finely held waits are timed, ms: a wait ends on the first sweep at or
 * after its time, never before, at most this much after. One timer sweeps
 * them all, where a timer each (a Timeout object per held heartbeat, 10,000
 * at once and 2,000 new a second in a large fleet) was garbage promoted with
 * every held heartbeat.
 */
export const WAIT_SWEEP_MS = 100;

export class AssignmentBoard {
  private readonly boards = new Map<string, NodeBoard>();
  /** Held waits' ends by the sweep they are due at (ms since the epoch, a multiple of WAIT_SWEEP_MS). */
  private readonly dueAt = new Map<number, Set<() => void>>();
  /** Null while no wait is held. */
  private sweeper: ReturnType<typeof setInterval> | null = null;
  /** Generations start from the clock so that a restarted control plane never repeats one an agent saw. */
  constructor(private readonly firstGeneration: number = Date.now()) {}

  private board(nodeId: string): NodeBoard {
    let b = this.boards.get(nodeId);
    if (!b) {
      b = { generation: this.firstGeneration, shards: [], waiters: new Set() };
      this.boards.set(nodeId, b);
    }
    return b;
  }

  get(nodeId: string): { generation: number; shards: ShardAssignment[] } {
    const b = this.board(nodeId);
    return { generation: b.generation, shards: b.shards };
  }

  /** Replaces a node's assignments; wakes its pending heartbeat only when something changed. The board keeps `shards` as given: the caller must not change the list afterwards. */
  set(nodeId: string, shards: ShardAssignment[]): void {
    const b = this.board(nodeId);
    // Most nodes of a large fleet run nothing, and every pass sets every
    // node: empty lists, or lists of different lengths, are told apart
    // without serialising; otherwise the JSON held of the last list saves
    // serialising it again at each pass.
    if (b.shards.length !== shards.length) {
      b.json = undefined;
    } else {
      if (shards.length === 0) return;
      const json = JSON.stringify(shards);
      if ((b.json ??= JSON.stringify(b.shards)) === json) return;
      b.json = json;
    }
    b.shards = shards;
    this.bump(nodeId);
  }

  /** A new generation with the same shards: tells the agent to report now (an admin action touched its node). */
  bump(nodeId: string): void {
    const b = this.board(nodeId);
    b.generation++;
    for (const w of b.waiters) w();
    b.waiters.clear();
  }

  /**
   * Resolves when the node's generation differs from `known`, or after
   * `waitMs`, or when cancelled. `onCancel`, when given, is called once if the
   * wait starts, with the function that ends it early; it returns what undoes
   * that registration, called as the wait ends however it ends. A callback
   * rather than an AbortSignal: one AbortController per held heartbeat, only
   * to hear its response close, was a visible share of a 10,000-node fleet's
   * CPU. Absent = ends only on a change or after waitMs.
   */
  waitForChange(
    nodeId: string,
    known: number,
    waitMs: number,
    onCancel?: (cancel: () => void) => () => void,
  ): Promise<void> {
    const b = this.board(nodeId);
    if (b.generation !== known || waitMs <= 0) return Promise.resolve();
    // A plain promise, not an async function: a held heartbeat keeps this
    // alive for seconds, and a suspended async frame keeps more than the
    // closure below (see the heartbeat route).
    return new Promise<void>((resolve) => {
      let ended = false;
      // Read by done, which can run while onCancel is still registering it.
      let unregister: (() => void) | undefined = undefined;
      const due = Math.ceil((Date.now() + waitMs) / WAIT_SWEEP_MS) * WAIT_SWEEP_MS;
      const done = () => {
        if (ended) return;
        ended = true;
        this.unschedule(due, done);
        b.waiters.delete(done);
        unregister?.();
        resolve();
      };
      this.schedule(due, done);
      b.waiters.add(done);
      unregister = onCancel?.(done);
      // Cancelled while registering: undone now, as the registration only now exists.
      if (ended) unregister?.();
    });
  }

  private schedule(due: number, end: () => void): void {
    let ends = this.dueAt.get(due);
    if (!ends) this.dueAt.set(due, (ends = new Set()));
    ends.add(end);
    // Unref'd: held heartbeats alone do not keep a stopping process alive.
    this.sweeper ??= setInterval(() => this.sweep(), WAIT_SWEEP_MS).unref();
  }

  private unschedule(due: number, end: () => void): void {
    const ends = this.dueAt.get(due);
    if (!ends) return;
    ends.delete(end);
    if (ends.size === 0) this.dueAt.delete(due);
    if (this.dueAt.size === 0 && this.sweeper !== null) {
      clearInterval(this.sweeper);
      this.sweeper = null;
    }
  }

  /** Ends every wait whose time has come; each takes itself off the schedule as it ends. */
  private sweep(): void {
    const now = Date.now();
    for (const [due, ends] of this.dueAt) {
      if (due > now) continue;
      for (const end of ends) end();
    }
  }

  /** Releases every pending heartbeat (shutdown). */
  releaseAll(): void {
    for (const b of this.boards.values()) {
      for (const w of b.waiters) w();
      b.waiters.clear();
    }
  }
}
