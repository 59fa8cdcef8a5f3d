// What the control plane builds around the batch runner beyond the Files and
// Batch APIs: the live pace the runner asks (live-pace.ts), the batch demand
// the scaler reads (demand.ts), and the deps of the admin API and the
// dashboard's Batches page (admin-api.ts). Gathered here so control-plane.ts
// wires batches' pacing and surfaces in a few lines.
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { ReplicaDirectory, ReplicaUse } from '../../gateway/ports/index.js';
import type { BatchCaller } from '../../gateway/ports/batches.js';
import type { Store } from '../store/index.js';
import type { BatchesAdminDeps } from './admin-api.js';
import type { BatchRepository, BatchRow } from './batch-store.js';
import { BatchDemandReader } from './demand.js';
import { LiveBatchPace, type PacedModel } from './live-pace.js';
import type { BatchPaceOptions } from './pace.js';
import type { BatchPace } from './runner.js';

/** How often the scaler's and the gauges' batch demand is read from the store, ms. */
export const BATCH_DEMAND_READ_MS = 2_000;

export interface BatchSurfacesDeps {
  readonly store: Store;
  /** The batches' repository openBatches made (Batches.repo): one per control plane, with its one group commit. */
  readonly repo: BatchRepository;
  readonly catalog: { resolve(nameOrAlias: string): PacedModel | undefined };
  /** This fleet's replicas (the reconciler's view: remote endpoints are not idle GPUs). */
  readonly replicas: Pick<ReplicaDirectory, 'ready'>;
  /** The router's side: in-flight per replica and interactive requests waiting per model. */
  readonly router: {
    replicaUse(): ReadonlyMap<string, ReplicaUse>;
    interactiveWaiting(model: string): number;
  };
  /** The client listener's cancel (BatchService.cancelBatch), as the batch's owner. */
  readonly cancel: (caller: BatchCaller, id: string) => Promise<unknown>;
  readonly now: () => number;
  readonly logger: Logger;
  readonly registry?: Registry;
  readonly loadFreshMs?: number;
  readonly paceOptions?: Partial<BatchPaceOptions>;
}

export interface BatchSurfaces {
  /** For openBatches().run: the pace over the runner's own in-flight count. */
  pace(inFlight: (model: string) => number): BatchPace;
  readonly demand: BatchDemandReader;
  readonly admin: BatchesAdminDeps;
  close(): void;
}

export function openBatchSurfaces(deps: BatchSurfacesDeps): BatchSurfaces {
  const repo = deps.repo;
  const demand = new BatchDemandReader(deps.store.connection.db, deps.now, deps.logger, deps.registry);
  demand.start(BATCH_DEMAND_READ_MS);
  let live: LiveBatchPace | null = null;
  const admin: BatchesAdminDeps = {
    repo,
    now: deps.now,
    pace: (model) => live?.report(model),
    cancel: async (row: BatchRow) => {
      await deps.cancel(callerOf(row), row.id);
      return repo.get(row.id);
    },
  };
  return {
    pace(inFlight) {
      live = new LiveBatchPace({
        catalog: deps.catalog,
        replicas: deps.replicas,
        use: () => deps.router.replicaUse(),
        interactiveWaiting: (m) => deps.router.interactiveWaiting(m),
        batchInFlight: inFlight,
        now: deps.now,
        ...(deps.loadFreshMs === undefined ? {} : { loadFreshMs: deps.loadFreshMs }),
        ...(deps.paceOptions ? { options: deps.paceOptions } : {}),
        ...(deps.registry ? { registry: deps.registry } : {}),
      });
      return live;
    },
    demand,
    admin,
    close: () => demand.stop(),
  };
}

/** The caller the client listener's cancel takes for a batch's owner: the owner is what it checks. */
export function callerOf(row: Pick<BatchRow, 'owner' | 'key_id'>): BatchCaller {
  if (row.owner.startsWith('team:')) return { keyId: row.key_id, team: row.owner.slice('team:'.length) };
  if (row.owner.startsWith('key:')) return { keyId: row.owner.slice('key:'.length) };
  return { keyId: 'anonymous' };
}
