// The replicas as the gateway reads them (its ReplicaDirectory port): which replicas of a
// model answer requests, why a model has none, whether one is coming for a
// request that waits, and a wake-up when the records change. Its own class
// because the router reads it on every request and the Reconciler class
// is about passes: this part only reads the records and the last plan, and
// the one thing it asks back (a pass for a cold model) goes through the
// functions it is given.
import type { Logger } from 'pino';
import type { ModelRejections } from './plan-types.js';
import type { ReplicaLoad, RouterReplica } from '../../gateway/index.js';
import type { KvEventsEndpoint } from '../../protocol/kv-events.js';
import { COUNTING_STATES, type ReplicaRecord } from './types.js';

export interface RouterViewDeps {
  /**
   * The records now; a new array whenever they change (never changed in
   * place): the view indexes them by model once per array.
   */
  readonly records: () => readonly ReplicaRecord[];
  /** Why the model was not placed in the last pass; undefined = nothing failed to place. */
  readonly explain: (model: string) => ModelRejections | undefined;
  /** The catalog's scaling bounds of a model; undefined = not in the catalog. */
  readonly scaling: (model: string) => { readonly min: number; readonly max: number } | undefined;
  /** The engine a model's profile runs; undefined = the model or profile is not in the catalog (any more). */
  readonly engineOf: (model: string, profile: string) => string | undefined;
  /**
   * Whether a replica the records call ready or draining is confirmed live
   * since this process started (serving.ts); one that is not yet is left out
   * of ready() and counts as coming, so requests are held as for a cold
   * start. Absent = every such record serves.
   */
  readonly serves?: (r: ReplicaRecord) => boolean;
  /** A replica's engine load; undefined = none reported. */
  readonly load?: (replicaId: string) => ReplicaLoad | undefined;
  /** Where a replica's engine tells what its KV cache holds; undefined = it tells nothing. */
  readonly kvEvents?: (replicaId: string) => KvEventsEndpoint | undefined;
  /** True when demand-based scaling is on (a demand source is attached): a model at zero can be started for a request. */
  readonly scalesOnDemand: () => boolean;
  /** A request waits for this model at zero: the next pass should start one. */
  readonly wantCold: (model: string) => void;
  /** Runs a pass soon. */
  readonly notify: () => void;
  readonly logger: Logger;
}

const NO_RECORDS: readonly ReplicaRecord[] = Object.freeze([]);

/** The records of one array by model, and each replica's model. */
interface RecordIndex {
  readonly from: readonly ReplicaRecord[];
  readonly byModel: Map<string, ReplicaRecord[]>;
  readonly modelOf: Map<string, string>;
}

export class RouterView {
  /** Ready replicas per model, rebuilt on the first read after a change. */
  private readonly readyCache = new Map<string, RouterReplica[]>();
  private readonly listeners = new Set<() => void>();
  /**
   * The records by model, made again when deps.records() gives a new array.
   * Without it every read after a change walked the whole fleet's records,
   * and engine loads change with every node's heartbeat: at 10,000 nodes
   * that was one walk of every record per request.
   */
  private index: RecordIndex | null = null;

  constructor(private readonly deps: RouterViewDeps) {}

  /** Replicas of a model that answer requests: ready ones, and draining ones, which finish what they have and take nothing new. */
  ready(model: string): readonly RouterReplica[] {
    let cached = this.readyCache.get(model);
    if (!cached) {
      const answering = this.recordsOf(model).filter(
        (r) => (r.state === 'ready' || r.state === 'draining') && r.endpoint !== null,
      );
      const serving = this.deps.serves ? answering.filter(this.deps.serves) : answering;
      const replicas = serving.map((r) => {
        const engine = this.deps.engineOf(r.model, r.profile);
        const load = this.deps.load?.(r.id);
        const kvEvents = this.deps.kvEvents?.(r.id);
        return {
          id: r.id,
          endpoint: r.endpoint!,
          draining: r.state === 'draining',
          ...(r.engineSecret ? { engineSecret: r.engineSecret } : {}),
          ...(engine === undefined ? {} : { engine }),
          ...(load === undefined ? {} : { load }),
          ...(kvEvents === undefined ? {} : { kvEvents }),
          ...(r.shards.length
            ? { nodes: [...new Set([...r.shards].sort((a, b) => a.rank - b.rank).map((sh) => sh.nodeId))] }
            : {}),
        };
      });
      // One not confirmed yet may be by a heartbeat that tells no listener (serving.ts): read again until it is.
      if (serving.length === answering.length) this.readyCache.set(model, replicas);
      cached = replicas;
    }
    return cached;
  }

  /** Why a model has no ready replica, to finish "model x has 0 ready replicas: …". */
  describe(model: string): string {
    const records = this.recordsOf(model);
    const counting = records.filter((r) => COUNTING_STATES.has(r.state));
    if (counting.length > 0) {
      const byState = new Map<string, number>();
      for (const r of counting) {
        // Ready in the store but not confirmed live since this process started: its engine may be starting again.
        const state =
          r.state === 'ready' && this.deps.serves?.(r) === false ? 'ready but not yet confirmed by its agent' : r.state;
        byState.set(state, (byState.get(state) ?? 0) + 1);
      }
      return [...byState].map(([state, n]) => `${n} ${state}`).join(', ');
    }
    const failed = records.find((r) => r.state === 'failed');
    if (failed) return `replica ${failed.id} failed: ${failed.error ?? 'no error reported'}`;
    const blocked = this.deps.explain(model);
    if (blocked && blocked.rejections.length > 0) {
      return `none can be placed (${blocked.rejections.length} rejection(s); first: ${blocked.rejections[0]!.reason}); see explain-placement`;
    }
    const wanted = this.deps.scaling(model)?.min ?? 0;
    return wanted === 0 ? 'no replica is wanted (scaling min 0)' : 'the reconciler has not placed one yet';
  }

  /**
   * A request waits for a model with no ready replica: true when one is on
   * its way (worth holding the request). With demand-based scaling, a model
   * at zero that may scale (max ≥ 1) gets one from the next pass, which runs
   * at once; concurrent calls for it are one demand, so they start one
   * replica.
   */
  demand(model: string): boolean {
    const scaling = this.deps.scaling(model);
    const coming = this.recordsOf(model).some((r) => COUNTING_STATES.has(r.state));
    const blocked = !!this.deps.explain(model)?.rejections.length;
    let willStart = coming || ((scaling?.min ?? 0) > 0 && !blocked);
    if (!coming && scaling && this.deps.scalesOnDemand() && Math.max(scaling.min, scaling.max) >= 1 && !blocked) {
      this.deps.wantCold(model);
      willStart = true;
    }
    this.deps.notify();
    return willStart;
  }

  /** Called after replica records change (a replica may have become ready); returns an unsubscribe. */
  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Engine loads (or where engines publish their KV events) changed for
   * `replicaIds`: the next read of their models rebuilds those replicas
   * with it. Listeners are not told: no replica came or went. Only the
   * models named are read again: every node's heartbeat brings loads, and
   * clearing every model's list at each one had every request rebuild its
   * model's replicas.
   */
  loadsChanged(replicaIds: Iterable<string>): void {
    const { modelOf } = this.indexed();
    for (const id of replicaIds) {
      const model = modelOf.get(id);
      if (model !== undefined) this.readyCache.delete(model);
    }
  }

  /** The records of `model`, in the records' order; empty = none. */
  private recordsOf(model: string): readonly ReplicaRecord[] {
    return this.indexed().byModel.get(model) ?? NO_RECORDS;
  }

  private indexed(): RecordIndex {
    const records = this.deps.records();
    if (this.index?.from === records) return this.index;
    const byModel = new Map<string, ReplicaRecord[]>();
    const modelOf = new Map<string, string>();
    for (const r of records) {
      let mine = byModel.get(r.model);
      if (!mine) byModel.set(r.model, (mine = []));
      mine.push(r);
      modelOf.set(r.id, r.model);
    }
    this.index = { from: records, byModel, modelOf };
    return this.index;
  }

  /** The records changed: forget what was read of them and tell the listeners. A listener that throws is logged, not fatal. */
  changed(): void {
    this.readyCache.clear();
    for (const l of this.listeners) {
      try {
        l();
      } catch (err) {
        this.deps.logger.error({ err }, 'a replica listener threw');
      }
    }
  }
}
