// The agent's probe: what this machine has (GPUs and their health, RAM, CPUs,
// disks and whether they are shared, weights already on disk, fabrics,
// engines it can start), as the NodeReport the agent sends with every
// heartbeat. Separate from the rest of the agent because it is the one part
// that reads the hardware: every parse is a pure function tested on outputs
// captured from real machines, every read goes through injected functions,
// and --simulate replaces the hardware with a declared machine, so the fleet
// can be tested, and simulated, on hosts without a GPU.
export {
  NodeProber,
  compileProbeOptions,
  defaultProbeDeps,
  probeNode,
  type ProbeConfig,
  type ProbeDeps,
  type ProbeOptions,
} from './probe-node.js';
export { classMemoryMiB, gpuClass, gpuFamily, marketingSizeGB, GPU_CLASS_RE } from './gpu-class.js';
export {
  GPU_QUERY_FIELDS,
  fallbackFields,
  gpuProblems,
  nvidiaSmiArgs,
  nvidiaSmiValue,
  parseNvidiaSmiOutput,
  probeGpus,
  throttleReasons,
  type GpuHealthFacts,
  type GpuProbeResult,
  type NvidiaSmiOutcome,
} from './nvidia-smi.js';
export { explainFromKernelLog, normaliseBusId, parseKernelLog, type KernelGpuEvent } from './kernel-log.js';
export { parseMeminfo, type MemoryInfo } from './meminfo.js';
export { findMount, isSharedFilesystem, parseMountinfo, unescapeMountField, type MountEntry } from './mountinfo.js';
export { probeDisks, type StatfsResult } from './disks.js';
export { listWeights, treeSizeBytes } from './weights.js';
export { parseFabricFlag, probeInfiniband } from './fabrics.js';
export { BUILTIN_ENGINES, ENGINE_NAMES, parseLlamaServerVersion, probeEngines, scriptPython } from './engines.js';
export {
  SIMULATE_SPEC_FORM,
  parseSimulateSpec,
  simulatedDisks,
  simulatedEngines,
  simulatedGpuUuid,
  simulatedGpus,
  type SimulatedDisk,
  type SimulatedMachine,
} from './simulate.js';
export { execProcess, findOnPath, isExecutableFile, type ExecFn, type ExecOptions, type ExecResult } from './exec.js';
