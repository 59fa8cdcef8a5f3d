// Responses kept for the Responses API's `store` and previous_response_id:
// the interface the router depends on (types.ts), kept in memory for a
// control plane without a store or in the store otherwise, per key, with a
// time to live and a size cap per key. A part of its own, as keys are, so
// the router needs nothing of the store but this interface.
export type { ResponseStore, StoredResponse } from './types.js';
export { RESPONSE_STORE_DEFAULTS, type ResponseStoreOptions } from './limits.js';
export { MemoryResponseStore } from './memory.js';
export { StoredResponses } from './stored.js';
