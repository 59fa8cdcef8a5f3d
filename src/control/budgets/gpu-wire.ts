// The GPU meter as the control plane builds it: which replicas hold which
// GPUs (the reconciler's shards, the agents' reports of their GPUs), the
// store or memory for its totals, and the sink the gateway records usage
// to. One call from control-plane.ts, so that file names the meter once.
import type { Logger } from 'pino';
import type { UsageSink } from '../../gateway/ports/index.js';
import type { GpuReport } from '../../protocol/node-report.js';
import { replicaHolds, shardHolds } from '../reconciler/node-usage.js';
import type { ReplicaRecord } from '../reconciler/types.js';
import type { StoreConnection } from '../store/connection.js';
import type { GpuPrices, HeldReplica } from './gpu-cost.js';
import { GpuMeter, MemoryGpuBook, StoredGpuBook, type GpuMeterOptions } from './gpu-meter.js';

/**
 * Every replica holding GPUs with the GPUs its nodes report; a GPU not
 * reported is known only by its count. What holds is what the node views
 * count (node-usage.ts): a failed replica and a stopped shard hold nothing.
 */
export function heldReplicas(
  replicas: readonly ReplicaRecord[],
  nodeGpus: (nodeId: string) => readonly GpuReport[] | undefined,
): HeldReplica[] {
  const out: HeldReplica[] = [];
  for (const r of replicas) {
    if (!replicaHolds(r)) continue;
    const gpus = [];
    for (const shard of r.shards) {
      if (!shardHolds(shard)) continue;
      const reported = nodeGpus(shard.nodeId) ?? [];
      for (const index of shard.gpuIndices) {
        const g = reported.find((x) => x.index === index);
        gpus.push({ name: g?.name, class: g?.class });
      }
    }
    out.push({ id: r.id, model: r.model, gpus });
  }
  return out;
}

/**
 * The meter over this control plane's fleet, and the usage sink to hand the
 * gateway; null meter (and `usage` as given) when gpu_prices is empty, so a
 * fleet that prices no GPU pays nothing for it.
 */
export function openGpuMeter(o: {
  prices: GpuPrices;
  replicas: () => readonly ReplicaRecord[];
  nodeGpus: (nodeId: string) => readonly GpuReport[] | undefined;
  store: StoreConnection | null;
  tokenPriced: (model: string) => boolean;
  usage: UsageSink & { charge?(keyId: string, model: string, endpoint: string, usd: number): void };
  cluster: { leads: () => boolean } | null;
  /** Money budgets to charge estimates and true up (gpu-owed.ts); absent = GPU-priced models stay free to them. */
  budgets?: GpuMeterOptions['budgets'];
  now: () => number;
  logger: Logger;
  intervalMs?: number;
}): { meter: GpuMeter | null; usage: UsageSink } {
  if (o.prices.size === 0) return { meter: null, usage: o.usage };
  const usage = o.usage;
  const meter = new GpuMeter({
    prices: o.prices,
    replicas: () => heldReplicas(o.replicas(), o.nodeGpus),
    tokenPriced: o.tokenPriced,
    ...(usage.charge ? { charge: (k, m, e, usd) => usage.charge!(k, m, e, usd) } : {}),
    ...(o.budgets ? { budgets: o.budgets } : {}),
    book: o.store ? new StoredGpuBook(o.store) : new MemoryGpuBook(),
    now: o.now,
    logger: o.logger,
    // A lone control plane on a store: `llmgw gateway` processes may add tokens beside it.
    ...(o.cluster ? { cluster: o.cluster } : o.store ? { watchOthers: true } : {}),
    ...(o.intervalMs === undefined ? {} : { intervalMs: o.intervalMs }),
  });
  return { meter, usage: meter.wrap(usage) };
}
