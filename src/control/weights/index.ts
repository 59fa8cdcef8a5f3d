// Weights from the control plane's side: the wanted set, the orphans each
// node reports, and collect, which asks nodes to remove theirs. The agent's
// side, which decides each removal, is src/agent/cache.
export { orphansView } from './weights.js';
export { collectAndAudit, orphansWithLastCollect, registerWeightsApi, type WeightsApiOptions } from './routes.js';
export { lastCollects } from './last-collect.js';
