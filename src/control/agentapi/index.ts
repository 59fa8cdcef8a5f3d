// The agent API: how node agents join and report, on its own listener
// because its callers hold node credentials, not admin tokens or API keys.
export { AssignmentBoard } from './assignments.js';
export { registerAgentApi } from './routes.js';
