// The wire between the agent and the control plane: types, schemas and the
// calculations both sides must agree on (cache names). Neither side imports
// the other; they meet here.
export * from './node-report.js';
export * from './source.js';
export * from './agent-api.js';
export * from './profile-env.js';
