// Between the router's demand and the reconciler's pass: what each replica
// has in flight and when it was last used (reported by the router, or summed
// over every instance by the leader), requests waiting for a model at zero,
// and the scaler's memory per model, turned into the wanted numbers a pass
// reads through planPass's `wanted` seam. Its own class because it is the
// one part of the reconciler that remembers demand between passes; the
// deciding itself is src/control/scaling's, and which replicas the scaler
// sees is scaleSignals, pure and tested apart.
import type { Logger } from 'pino';
import type { EventSink } from '../events/index.js';
import {
  type BatchDemand,
  decideScale,
  type DemandSnapshot,
  type ReplicaSignal,
  type ReplicaUse,
  type ScaleState,
  type ScalingPolicy,
} from '../scaling/index.js';
import { COUNTING_STATES, type ReplicaRecord } from './types.js';

/** The parts of a catalog model the scaler reads; the catalog's Model has them. */
export interface ScalableModel {
  readonly name: string;
  readonly scaling: ScalingPolicy;
}

/** One model's replicas as the scaler weighs them. */
export interface ModelScaleSignals {
  readonly replicas: ReplicaSignal[];
  /** Failed replicas waiting for a retry. */
  readonly failed: number;
}

/**
 * Per model (only models with records have an entry), the replicas that
 * count and the failed ones. A replica being moved off a draining node and
 * its replacement fill one slot, as in the plan: until the old one starts
 * draining it is the one serving (its in-flight is demand), so the
 * replacement is not counted a second time. Idleness starts no earlier than
 * `demandSinceMs`, when this process began reading the router: after a
 * restart (its router was down too, so no request could reach any replica)
 * a replica is given the whole idle_timeout again, not drained at once.
 */
export function scaleSignals(
  records: readonly ReplicaRecord[],
  inFlight: ReadonlyMap<string, number>,
  demandSinceMs: number,
  engineQueued: ReadonlyMap<string, number> = new Map(),
): Map<string, ModelScaleSignals> {
  const counting = new Set(records.filter((r) => COUNTING_STATES.has(r.state)).map((r) => r.id));
  const byModel = new Map<string, { replicas: ReplicaSignal[]; failed: number }>();
  for (const r of records) {
    let g = byModel.get(r.model);
    if (!g) byModel.set(r.model, (g = { replicas: [], failed: 0 }));
    if (r.state === 'failed') g.failed++;
    if (!COUNTING_STATES.has(r.state) || (r.replaces !== null && counting.has(r.replaces))) continue;
    const ready = r.state === 'ready';
    const engine = engineQueued.get(r.id);
    g.replicas.push({
      id: r.id,
      ready,
      inFlight: inFlight.get(r.id) ?? 0,
      ...(engine === undefined ? {} : { engineQueued: engine }),
      idleSinceMs: Math.max(r.lastUsedAtMs ?? 0, ready ? r.stateSinceMs : r.createdAtMs, demandSinceMs),
    });
  }
  return byModel;
}

export interface ScalingBridgeDeps {
  /** Epoch ms. */
  readonly now: () => number;
  readonly logger: Logger;
  /** Where scaling decisions are recorded; absent = nowhere. */
  readonly events?: EventSink;
}

export class ScalingBridge {
  private source: (() => DemandSnapshot) | null = null;
  /** When this process began reading the router's demand; idleness before it was not seen (0 = not yet). */
  private sinceMs = 0;
  /** The scaler's memory per model name; absent = not decided since this control plane started (or began leading). */
  private readonly states = new Map<string, ScaleState>();
  /** Models a request asked for while they had no ready replica, since the last decision. */
  private readonly cold = new Set<string>();
  /** Requests in flight per replica id as last reported; no entry = none reported. */
  private readonly inFlightById = new Map<string, number>();
  /** Last use per replica id as reported, laid over the records again after each pass so a report made while it persisted is kept. */
  private readonly lastUsedById = new Map<string, number>();

  constructor(private readonly deps: ScalingBridgeDeps) {}

  /** Where demand is read from at each pass (the router). Without one nothing scales on demand: every model runs scaling.min. */
  attach(source: () => DemandSnapshot): void {
    this.source = source;
    this.sinceMs = this.deps.now();
  }

  get attached(): boolean {
    return this.source !== null;
  }

  /**
   * What was remembered of demand is from another time (another instance
   * led meanwhile): scaling memory, in-flight and last-use numbers and cold
   * demand are dropped, and idleness counts from now, as after a restart.
   */
  reset(): void {
    this.states.clear();
    this.inFlightById.clear();
    this.lastUsedById.clear();
    this.cold.clear();
    this.sinceMs = this.deps.now();
  }

  /** Requests in flight per replica id, for the pass's drains; no entry = none reported. */
  get inFlight(): ReadonlyMap<string, number> {
    return this.inFlightById;
  }

  /** Records one replica's use; true when it carried a last use (the records should take it: withLastUsed). */
  report(replicaId: string, use: Readonly<ReplicaUse>): boolean {
    this.inFlightById.set(replicaId, use.inFlight);
    if (use.lastUsedAtMs === null) return false;
    this.lastUsedById.set(replicaId, use.lastUsedAtMs);
    return true;
  }

  /**
   * `records` with the last uses reported, the newer of the two kept: a
   * stored use (another instance's) is not undone by an older one heard
   * here. The same array when no use is newer than its record's, so a
   * fleet that reports every second copies its records only when a use
   * moved.
   */
  withLastUsed(records: ReplicaRecord[]): ReplicaRecord[] {
    if (this.lastUsedById.size === 0) return records;
    let out: ReplicaRecord[] | null = null;
    for (let i = 0; i < records.length; i++) {
      const r = records[i]!;
      const at = this.lastUsedById.get(r.id);
      if (at === undefined || (r.lastUsedAtMs !== null && at <= r.lastUsedAtMs)) continue;
      out ??= records.slice();
      out[i] = { ...r, lastUsedAtMs: at };
    }
    return out ?? records;
  }

  /** Replicas gone from the records: their use is forgotten. */
  forget(replicaIds: Iterable<string>): void {
    for (const id of replicaIds) {
      this.inFlightById.delete(id);
      this.lastUsedById.delete(id);
    }
  }

  /** A request waits for this model at zero: the next decision starts one. */
  wantCold(model: string): void {
    this.cold.add(model);
  }

  /** Each model's wanted number as last decided; a model not decided yet has no entry (its min applies). */
  lastWanted(): Map<string, number> {
    return new Map([...this.states].map(([model, st]) => [model, st.wanted]));
  }

  /**
   * Reads the router's demand and records its use. Undefined = no source is
   * attached; null = the source threw (logged): the pass should keep the
   * previous wanted numbers.
   */
  read(): DemandSnapshot | null | undefined {
    if (!this.source) return undefined;
    let snapshot: DemandSnapshot;
    try {
      snapshot = this.source();
    } catch (err) {
      this.deps.logger.error(
        { err },
        "reading the router's demand failed; this pass keeps the previous wanted numbers",
      );
      return null;
    }
    for (const [id, use] of snapshot.replicas) this.report(id, use);
    return snapshot;
  }

  /**
   * Asks the scaler for each catalog model's wanted number at `now`, from
   * `records` (with their last uses laid over), the requests `queued` per
   * model and the engines' own running + waiting per replica id (fresh
   * samples only; absent = none) and the batch lines per model (absent = none: counted only up to
   * scaling.batch_max_replicas); records each change as a scale event. Cold demand is used up; a
   * model gone from the catalog starts afresh if it comes back.
   */
  decide(
    now: number,
    records: readonly ReplicaRecord[],
    models: readonly ScalableModel[],
    queued: ReadonlyMap<string, number>,
    engineQueued?: ReadonlyMap<string, number>,
    batch?: ReadonlyMap<string, BatchDemand>,
  ): Map<string, number> {
    const signals = scaleSignals(records, this.inFlightById, this.sinceMs, engineQueued);
    const wanted = new Map<string, number>();
    for (const m of models) {
      const g = signals.get(m.name) ?? { replicas: [], failed: 0 };
      const lines = batch?.get(m.name);
      const result = decideScale(
        {
          policy: m.scaling,
          replicas: g.replicas,
          failed: g.failed,
          queued: queued.get(m.name) ?? 0,
          coldDemand: this.cold.has(m.name),
          ...(lines ? { batch: lines } : {}),
        },
        this.states.get(m.name),
        now,
      );
      this.states.set(m.name, result.state);
      wanted.set(m.name, result.wanted);
      if (result.decision) {
        const d = result.decision;
        this.deps.events?.record({
          kind: 'scale',
          model: m.name,
          from: d.from,
          to: d.to,
          message: `${m.name}: ${d.from} → ${d.to} replica(s): ${d.reason}`,
        });
      }
    }
    this.cold.clear();
    const names = new Set(models.map((m) => m.name));
    for (const name of this.states.keys()) if (!names.has(name)) this.states.delete(name);
    return wanted;
  }
}
