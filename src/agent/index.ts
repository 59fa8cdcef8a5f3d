// The node agent: one per machine. It reports what the machine has (probe),
// fetches and keeps weights (fetch, cache), and runs the shards it is
// assigned (supervisor, engines), and reads their load for the router (load).
// It never imports the control plane; the two meet in src/protocol.
export { Agent, compileAgentOptions } from './agent.js';
export { AGENT_DEFAULTS } from './defaults/index.js';
