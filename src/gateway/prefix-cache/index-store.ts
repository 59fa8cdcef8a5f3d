// The prefix-cache index: which replica holds which cached block, fed by
// the engines' KV events (src/protocol/kv-events.ts) and asked, per
// request, how many of the prompt's leading tokens each replica would find
// cached. Pure: no I/O, no clock; the subscriptions (subscriptions.ts) feed
// it and the chooser asks it, so it is tested with events built by hand.
//
// Keys are the index's own chain hashes (chain-hash.ts) over each stored
// block's tokens, its parent's chain hash first; the engine's block ids are
// kept per replica only to find what a removal names. Memory is bounded: at
// most `maxBlocks` (replica, block) entries over every replica; past it,
// the replica holding the most loses its least recently stored block. A
// replica's entries all go when it leaves, clears its cache, or its source
// skips a batch (a gap: events were lost, so what is held is unknown until
// the source resyncs). One replica may hold the same tokens under two ids
// (llama.cpp keeps a copy per slot): the block stays held until both go.
import type { KvEventBatch, KvBlock } from '../../protocol/kv-events.js';
import { chainHash, promptChain, ROOT_CHAIN } from './chain-hash.js';

/** Entries the index keeps by default: see docs/prefix-cache.md for the bytes each costs. */
export const DEFAULT_MAX_BLOCKS = 1_000_000;

interface ReplicaState {
  /** Its bit position among holders: small, reused after the replica goes. */
  readonly slot: number;
  /** Tokens per full block, from its last batch; 0 = no batch yet. */
  blockSize: number;
  /** The last batch's seq; -1 = none yet. */
  lastSeq: number;
  /** Engine block id → chain hash, least recently stored first (Map order). */
  readonly blocks: Map<string, number>;
  /** Chains this replica holds under more than one id → how many more; absent = one (nearly always). */
  readonly extra: Map<number, number>;
}

/** What one batch did to the index. */
export interface ApplyOutcome {
  /** The batch's seq did not follow the last one: the replica's entries were dropped before it was applied. */
  readonly gap: boolean;
  /** Blocks whose parent the index did not know, so they could not be chained and were skipped. */
  readonly orphans: number;
}

export class KvIndex {
  /**
   * Chain hash → the slots of the replicas holding it: one slot as a number
   * (nearly always: most blocks live on one or two replicas), several as an
   * array. Kept this way because it is most of the index's memory.
   */
  private readonly holders = new Map<number, number | number[]>();
  private readonly replicas = new Map<string, ReplicaState>();
  private readonly bySlot: (string | undefined)[] = [];
  private entries = 0;

  /** `maxBlocks`: (replica, block) entries kept at most over every replica; 0 or absent = DEFAULT_MAX_BLOCKS. */
  constructor(readonly maxBlocks = DEFAULT_MAX_BLOCKS) {
    if (maxBlocks <= 0) this.maxBlocks = DEFAULT_MAX_BLOCKS;
  }

  /** (replica, block) entries held now. */
  get size(): number {
    return this.entries;
  }

  /** Replicas with a state (known to the index, possibly holding nothing). */
  replicaIds(): string[] {
    return [...this.replicas.keys()];
  }

  /** Entries held for one replica; 0 = none or unknown. */
  sizeOf(replicaId: string): number {
    return this.replicas.get(replicaId)?.blocks.size ?? 0;
  }

  /** Applies one batch from a replica's source, in order. A batch out of sequence drops the replica's entries first. */
  apply(replicaId: string, batch: KvEventBatch): ApplyOutcome {
    const r = this.stateOf(replicaId);
    const gap = r.lastSeq >= 0 && batch.seq !== r.lastSeq + 1;
    if (gap || (r.blockSize !== 0 && r.blockSize !== batch.blockSize)) this.clear(r);
    r.lastSeq = batch.seq;
    r.blockSize = batch.blockSize;
    let orphans = 0;
    for (const e of batch.events) {
      if (e.kind === 'cleared') this.clear(r);
      else if (e.kind === 'removed') for (const h of e.hashes) this.remove(r, h);
      else orphans += this.store(r, e.parent, e.blocks);
    }
    return { gap, orphans };
  }

  /** Forgets a replica's entries (a resync, a reset), keeping it known; its next batch is taken whatever its seq. */
  reset(replicaId: string): void {
    const r = this.replicas.get(replicaId);
    if (!r) return;
    this.clear(r);
    r.lastSeq = -1;
  }

  /** Forgets a replica entirely: it is gone, or no longer routed by cache. */
  drop(replicaId: string): void {
    const r = this.replicas.get(replicaId);
    if (!r) return;
    this.clear(r);
    this.replicas.delete(replicaId);
    this.bySlot[r.slot] = undefined;
  }

  /**
   * The prompt's leading tokens each replica holds cached: for every
   * replica in `replicaIds` the index knows, the tokens of the prompt's
   * blocks from the first up to the first it lacks (0 = none, or its block
   * size is not yet known). Replicas the index does not know are absent.
   */
  lookup(tokens: readonly number[], replicaIds: readonly string[]): Map<string, number> {
    return this.lookupBlocks((size) => {
      const { hashes, lengths } = promptChain(tokens, size);
      return { hashes, tail: lengths.at(-1) ?? 0 };
    }, replicaIds);
  }

  /**
   * As lookup, from the prompt's chain hashes per block size (a tokenised
   * prompt the gateway keeps without its tokens); a block size `blocksOf`
   * has no answer for counts as no hit for the replicas that use it.
   */
  lookupBlocks(
    blocksOf: (blockSize: number) => { readonly hashes: ArrayLike<number>; readonly tail: number } | undefined,
    replicaIds: readonly string[],
  ): Map<string, number> {
    const out = new Map<string, number>();
    const bySize = new Map<number, ReplicaState[]>();
    for (const id of replicaIds) {
      const r = this.replicas.get(id);
      if (!r) continue;
      out.set(id, 0);
      if (r.blockSize <= 0 || r.blocks.size === 0) continue;
      const group = bySize.get(r.blockSize);
      if (group) group.push(r);
      else bySize.set(r.blockSize, [r]);
    }
    for (const [blockSize, group] of bySize) {
      const blocks = blocksOf(blockSize);
      if (!blocks) continue;
      const n = blocks.hashes.length;
      let alive = group;
      for (let i = 0; i < n && alive.length > 0; i++) {
        const held = this.holders.get(blocks.hashes[i]!);
        if (held === undefined) break;
        alive = alive.filter((r) => (typeof held === 'number' ? held === r.slot : held.includes(r.slot)));
        const length = i === n - 1 ? blocks.tail : blockSize;
        for (const r of alive) {
          const id = this.bySlot[r.slot]!;
          out.set(id, out.get(id)! + length);
        }
      }
    }
    return out;
  }

  /** The block sizes of these replicas, as their last batch said; empty = none has sent one. */
  blockSizes(replicaIds: readonly string[]): number[] {
    const sizes = new Set<number>();
    for (const id of replicaIds) {
      const r = this.replicas.get(id);
      if (r && r.blockSize > 0) sizes.add(r.blockSize);
    }
    return [...sizes];
  }

  private stateOf(replicaId: string): ReplicaState {
    let r = this.replicas.get(replicaId);
    if (!r) {
      let slot = this.bySlot.indexOf(undefined);
      if (slot < 0) slot = this.bySlot.length;
      this.bySlot[slot] = replicaId;
      r = { slot, blockSize: 0, lastSeq: -1, blocks: new Map(), extra: new Map() };
      this.replicas.set(replicaId, r);
    }
    return r;
  }

  /** Returns the blocks skipped for want of a known parent. */
  private store(r: ReplicaState, parent: string | undefined, blocks: readonly KvBlock[]): number {
    let chain = ROOT_CHAIN;
    if (parent !== undefined) {
      const known = r.blocks.get(parent);
      // The parent was evicted here, or stored before a gap: these blocks cannot be reached from a prompt's start.
      if (known === undefined) return blocks.length;
      chain = known;
    }
    for (const b of blocks) {
      chain = chainHash(chain, b.tokens);
      const had = r.blocks.get(b.hash);
      if (had !== undefined) {
        // Stored again: now the most recent. An engine id reused for other tokens moves to the new chain.
        r.blocks.delete(b.hash);
        if (had !== chain) this.unhold(had, r);
        else this.entries--;
      }
      if (had !== chain) this.hold(chain, r);
      r.blocks.set(b.hash, chain);
      this.entries++;
      if (had !== chain) this.evictOverCap();
    }
    return 0;
  }

  private remove(r: ReplicaState, engineHash: string): void {
    const chain = r.blocks.get(engineHash);
    if (chain === undefined) return;
    r.blocks.delete(engineHash);
    this.unhold(chain, r);
  }

  private clear(r: ReplicaState): void {
    for (const chain of r.blocks.values()) this.unhold(chain, r);
    r.blocks.clear();
    r.extra.clear();
  }

  private hold(chain: number, r: ReplicaState): void {
    const slot = r.slot;
    const held = this.holders.get(chain);
    if (held === undefined) this.holders.set(chain, slot);
    else if (typeof held === 'number') {
      if (held !== slot) this.holders.set(chain, [held, slot]);
      else r.extra.set(chain, (r.extra.get(chain) ?? 0) + 1);
    } else if (!held.includes(slot)) held.push(slot);
    else r.extra.set(chain, (r.extra.get(chain) ?? 0) + 1);
  }

  /** Takes one entry away: the replica holds the chain under one id fewer. */
  private unhold(chain: number, r: ReplicaState): void {
    this.entries--;
    const more = r.extra.get(chain);
    if (more !== undefined) {
      if (more <= 1) r.extra.delete(chain);
      else r.extra.set(chain, more - 1);
      return;
    }
    const slot = r.slot;
    const held = this.holders.get(chain);
    if (held === undefined) return;
    if (typeof held === 'number') {
      if (held === slot) this.holders.delete(chain);
      return;
    }
    const i = held.indexOf(slot);
    if (i >= 0) held.splice(i, 1);
    if (held.length === 1) this.holders.set(chain, held[0]!);
  }

  /** Past the cap, the replica holding the most loses its least recently stored blocks, so one busy engine cannot crowd out the rest. */
  private evictOverCap(): void {
    while (this.entries > this.maxBlocks) {
      let biggest: ReplicaState | undefined;
      for (const r of this.replicas.values()) if (!biggest || r.blocks.size > biggest.blocks.size) biggest = r;
      if (!biggest || biggest.blocks.size === 0) return;
      const [engineHash, chain] = biggest.blocks.entries().next().value as [string, number];
      biggest.blocks.delete(engineHash);
      this.unhold(chain, biggest);
    }
  }
}
