// Responses kept for the Responses API's `store` and `previous_response_id`:
// the record and the store's interface are the gateway's port
// (src/gateway/ports/index.ts), which this part implements in memory and in the
// store. Every read and delete is by key: one API key never reads,
// continues or deletes another's responses.
export type { ResponseStore, StoredResponse } from '../../gateway/ports/index.js';
