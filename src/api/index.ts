// The admin API client, shared by `llmgw ctl`, the dashboard tests and the
// end-to-end tests. Separate from src/control because its callers must reach
// the control plane only the way an operator does, over HTTP: the types here
// mirror the wire, not the server's internals.
export { AdminApiError, AdminApiUnreachableError, AdminClient, type AdminClientOptions } from './client.js';
export type * from './types.js';
export type * from './traffic-types.js';
export type * from './money-types.js';
export type * from './people-types.js';
export type * from './batch-types.js';
