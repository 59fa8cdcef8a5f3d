// The agent's probe: what this machine has (GPUs and their health, RAM, CPUs,
// disks and whether they are shared, weights already on disk, fabrics,
// engines it can start), as the NodeReport the agent sends with every
// heartbeat. Separate from the rest of the agent because it is the one part
// that reads the hardware: every parse is a pure function tested on outputs
// captured from real machines, every read goes through injected functions,
// and --simulate replaces the hardware with a declared machine, so the fleet
// can be tested, and simulated, on hosts without a GPU.
export { NodeProber, type ProbeDeps, type ProbeOptions } from './probe-node.js';
export { rpcServerOnPath } from './engines.js';
