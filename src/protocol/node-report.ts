// What an agent says about its machine, on the wire. Snake_case JSON like the
// seed's views. Read leniently on purpose: unknown fields (from a newer agent)
// are dropped, missing ones (from an older agent) read as unknown, never as
// zero or "none". Absent = not reported; an empty list = looked and found none.
import { z } from 'zod';
import { plainName } from './text.js';

/** Version of the agent protocol spoken under /agent/v1. Bumped only for changes an older peer must know about. */
export const PROTOCOL_VERSION = 1;

export const GpuReportSchema = z.object({
  index: z.number().int().nonnegative(),
  uuid: plainName('GPU uuid').optional(),
  /** As nvidia-smi prints it, e.g. "NVIDIA H100 80GB HBM3". */
  name: plainName('GPU name').optional(),
  /** Normalised class used by placement, e.g. "h100-80gb". Absent: could not be derived. */
  class: plainName('GPU class').optional(),
  memory_total_mib: z.number().nonnegative().optional(),
  memory_used_mib: z.number().nonnegative().optional(),
  temperature_c: z.number().optional(),
  /** Uncorrected (double-bit) ECC errors, aggregate. Absent: not supported or not reported. */
  ecc_uncorrected: z.number().int().nonnegative().optional(),
  retired_pages_pending: z.boolean().optional(),
  remapped_rows_pending: z.boolean().optional(),
  remapped_rows_failure: z.boolean().optional(),
  throttle_reasons: z.array(z.string()).optional(),
  /** Sentences an operator can act on; empty = healthy. A GPU with problems is kept out of placement. */
  problems: z.array(z.string()).default([]),
});
export type GpuReport = z.infer<typeof GpuReportSchema>;

export const DiskReportSchema = z.object({
  /** A control character in it is written as mountinfo does (\012), never raw (src/agent/probe/disks.ts). */
  mount_point: plainName('mount point'),
  fs_type: plainName('filesystem type').optional(),
  /** The mount source (device, server:/export), for the operator; never used for decisions. */
  source: plainName('mount source').optional(),
  /** A network or cluster filesystem: its space is not this node's to spend. */
  shared: z.boolean().default(false),
  free_bytes: z.number().nonnegative().optional(),
  total_bytes: z.number().nonnegative().optional(),
  /** Which of the agent's directories (cache, model dirs) live on this filesystem. */
  paths: z.array(z.string()).default([]),
});
export type DiskReport = z.infer<typeof DiskReportSchema>;

export const WeightsReportSchema = z.object({
  path: z.string(),
  size_bytes: z.number().nonnegative().optional(),
  /** 'cache': fetched by llmgw into its cache; 'model_dir': put there by the operator (never deleted). */
  kind: z.enum(['cache', 'model_dir']).catch('model_dir'),
  /** Set only for cache entries: the 64-hex name the agent wrote. */
  cache_name: z.string().optional(),
  source: z.string().optional(),
  /** Epoch ms of the last time a shard used it; absent = unknown. */
  last_used_ms: z.number().optional(),
});
export type WeightsReport = z.infer<typeof WeightsReportSchema>;

export const FabricReportSchema = z.object({
  name: z.string(),
  /** This node's address on the fabric; absent = the fabric is present but no address was configured. */
  address: z.string().optional(),
  /** 'configured' from --fabric, 'infiniband' found under /sys/class/infiniband. */
  kind: z.string().optional(),
  /** Link state as the hardware reports it, e.g. "ACTIVE"; absent = unknown. */
  state: z.string().optional(),
  rate: z.string().optional(),
});
export type FabricReport = z.infer<typeof FabricReportSchema>;

export const EngineReportSchema = z.object({
  name: plainName('engine name'),
  /** Free text from the engine's own --version: kept, and escaped where printed. */
  version: z.string().optional(),
  path: z.string().optional(),
});
export type EngineReport = z.infer<typeof EngineReportSchema>;

/** Engine ports, inclusive. The control plane routes only to endpoints inside them. */
export const PortRangeSchema = z.object({
  first: z.number().int().min(1).max(65535),
  last: z.number().int().min(1).max(65535),
});

export const NodeReportSchema = z.object({
  hostname: plainName('hostname').optional(),
  cpu_count: z.number().int().nonnegative().optional(),
  memory_total_bytes: z.number().nonnegative().optional(),
  memory_available_bytes: z.number().nonnegative().optional(),
  /** Absent: not probed (unknown). Empty: probed, no GPU (a CPU node). */
  gpus: z.array(GpuReportSchema).optional(),
  /** Set when the GPU probe itself failed (nvidia-smi errored): the node's GPUs are unknown, and why. */
  gpu_probe_error: z.string().optional(),
  disks: z.array(DiskReportSchema).optional(),
  weights: z.array(WeightsReportSchema).optional(),
  fabrics: z.array(FabricReportSchema).optional(),
  engines: z.array(EngineReportSchema).optional(),
  cache_dir: z.string().optional(),
  model_dirs: z.array(z.string()).optional(),
  /** Set when the agent runs with --simulate: the hardware is declared, not probed. */
  simulated: z.boolean().optional(),
  /**
   * Where the control plane reaches this node's engines (--engine-host, unless
   * a wildcard) and the ports they take (--port-range). The control plane
   * refuses shard endpoints elsewhere. Absent = not declared (an older agent):
   * endpoints must then be on the address the node reports from. A malformed
   * range reads as not declared rather than losing the whole report.
   */
  engine_host: z.string().max(256).optional().catch(undefined),
  port_range: PortRangeSchema.optional().catch(undefined),
});
export type NodeReport = z.infer<typeof NodeReportSchema>;

/**
 * What one engine said of its load at the agent's last scrape of its
 * Prometheus endpoint, carried on that shard's status in each heartbeat.
 * Counts are requests; a malformed sample reads as none (not reported)
 * rather than failing the shard's status. Added within protocol version 1:
 * an older control plane drops the field, an older agent never sends it.
 */
export const ShardLoadSchema = z
  .object({
    /** Requests the engine is generating for now (vLLM num_requests_running, llama.cpp requests_processing). */
    running: z.number().nonnegative().max(1e9),
    /** Requests queued inside the engine for a free sequence (vLLM num_requests_waiting, llama.cpp requests_deferred). */
    waiting: z.number().nonnegative().max(1e9),
    /** Share of the KV cache in use, 0..1; absent = the engine does not report it (llama.cpp). */
    kv_usage: z.number().min(0).max(1).optional(),
    /**
     * The prefix cache's hit rate, 0..1 (vLLM: hit over queried tokens since
     * the agent's previous scrape; SGLang: its own gauge); absent = the engine
     * does not report one (llama.cpp), or has looked nothing up yet. Added
     * within protocol version 1; a bad value drops only itself, not the load.
     */
    cache_hit_rate: z.number().min(0).max(1).optional().catch(undefined),
    /**
     * How long before this heartbeat was sent the scrape happened, ms. An age
     * rather than a time, so the agent's and control plane's clocks need not agree.
     */
    age_ms: z.number().int().nonnegative(),
  })
  .optional()
  .catch(undefined);
export type ShardLoad = NonNullable<z.infer<typeof ShardLoadSchema>>;
