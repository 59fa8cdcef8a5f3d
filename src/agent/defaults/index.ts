// Every default of the node agent's options, in one table. `llmgw agent`'s
// flags, compileAgentOptions, the supervisor and the load scraper all read
// it, so a default is written once. A leaf with no imports, in a folder of
// its own, so that the agent's subfolders (supervisor, load) can read it
// without importing the agent that imports them.

/** What each agent option means when it is absent, in the unit its name carries. */
export const AGENT_DEFAULTS = Object.freeze({
  /** Where the agent keeps its credential, engine records and (under `cache/`) weights; relative to the working directory. */
  stateDir: './.llmgw/agent',
  /** The management API: loopback, port 0 = a free port picked at start. */
  mgmtAddr: '127.0.0.1:0',
  /** How often to report when the control plane does not say. */
  heartbeatIntervalMs: 5_000,
  /** pino level of the agent's own log. */
  logLevel: 'info',
  /** Where engines bind: loopback, so only this machine reaches them until told otherwise. */
  engineHost: '127.0.0.1',
  /** Engine ports come from firstPort..lastPort, inclusive. */
  firstPort: 20_000,
  lastPort: 20_999,
  /** How often a ready engine is health-checked again to catch a hang; 0 = never. */
  livenessIntervalMs: 10_000,
  /** Failed health checks in a row after which a ready engine is stopped and restarted; at least 1. */
  livenessFailures: 3,
  /** How often ready engines' /metrics are read for load-aware routing; 0 = never. */
  loadIntervalMs: 1_000,
} as const);
