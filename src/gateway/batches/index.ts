// The Files and Batch APIs' gateway side: their routes on the client
// listener, and the in-process entry point batch lines are run through.
export { IN_PROCESS_HEADER, InProcessCalls, type InProcessAnswer } from './in-process.js';
export { registerBatchRoutes } from './routes.js';
