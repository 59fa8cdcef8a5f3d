// Whether a replica the records call ready really serves, as far as this
// process knows: its own module because the records alone cannot say. They
// are loaded from the store at start, and a replica stored as ready may
// have died with the process that ran it: restarted, `llmgw up` routed
// requests to an engine its agent had not started again yet, and clients got
// 502 connection refused instead of the cold-start hold (issue 35). So a
// stored state counts only once something live confirms it: the shard's
// agent reported it ready at that endpoint since this process started
// (directly, or passed on through the store by another instance), or, for a
// node this process has heard no report from, a heartbeat of that node
// arrived after this process started (a follower that started after the
// leader's last report of a steady replica, where nothing new is written).
import type { ShardStatus } from '../../protocol/index.js';
import type { Inventory } from '../inventory/index.js';
import type { ReplicaRecord } from './types.js';

export class ServingCheck {
  /** Per node, from the last report heard of it: each shard it called ready, with the endpoint it gave (null = none, a rank above 0). */
  private readonly heard = new Map<string, Map<string, string | null>>();

  /**
   * `startedAtMs`: when this process started, on the `now` clock the
   * inventory's heartbeats are dated by; a heartbeat before it says nothing
   * of the engines now.
   */
  constructor(
    private readonly inventory: Pick<Inventory, 'get' | 'liveness'>,
    private readonly startedAtMs: number,
  ) {}

  /**
   * Takes a node's believed shard statuses (screened: its own shards only);
   * returns true when what it calls ready changed, so a read of the ready
   * replicas made before is out of date.
   */
  heardFrom(nodeId: string, believed: readonly ShardStatus[]): boolean {
    const ready = new Map<string, string | null>();
    for (const s of believed) if (s.state === 'ready') ready.set(s.shard_id, s.endpoint ?? null);
    const before = this.heard.get(nodeId);
    this.heard.set(nodeId, ready);
    if (!before || before.size !== ready.size) return true;
    for (const [id, endpoint] of ready) if (!before.has(id) || before.get(id) !== endpoint) return true;
    return false;
  }

  /**
   * True when every shard of `r` is confirmed: its node's last report heard
   * here called it ready at the endpoint the record holds, or no report of
   * that node was heard here and its last heartbeat came after this process
   * started. The record's own state is the caller's to check.
   */
  serves(r: ReplicaRecord): boolean {
    return r.shards.every((s) => {
      const heard = this.heard.get(s.nodeId);
      if (heard) return heard.has(s.id) && heard.get(s.id) === s.endpoint;
      const node = this.inventory.get(s.nodeId);
      return (
        node !== undefined &&
        node.lastSeenMs !== null &&
        node.lastSeenMs >= this.startedAtMs &&
        this.inventory.liveness(node) === 'up'
      );
    });
  }
}
