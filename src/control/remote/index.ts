// Remote endpoints and peer fleets from the control plane's side: the
// catalog's `engine: remote` models presented to the gateway as replicas
// (fleet.ts), each probed for health, and for a peer llmgw its fleet's load
// (probe.ts). The gateway's circuits, Retry-After waits and spill-over are in
// src/gateway/remote; the sealed API keys in src/control/secrets.
export { RemoteFleet, type RemoteFleetOptions, type RemoteCatalog } from './fleet.js';
export { judgeProbe, probePath, runProbe, type ProbeResult, type RemoteHealth } from './probe.js';
