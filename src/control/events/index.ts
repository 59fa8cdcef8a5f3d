// The events log: what the fleet did and why, in words an operator reads —
// scaling decisions (model, from, to, why), nodes joining, going stale, lost
// and back, admin state changes, drains, failed and lost replicas, placement
// failures. Separate from the audit log, which records what people asked
// for; this records what the control plane did on its own. Kept in the store
// (bounded) so every control plane sharing it shows the same history.
export { Events, nodeChangeEvent, type EventSink, type NewEvent } from './events.js';
export { registerEventsApi } from './routes.js';
