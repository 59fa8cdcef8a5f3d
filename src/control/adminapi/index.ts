// The admin API: the control plane's management surface, on the admin
// listener rather than the client one because the audiences differ: one
// serves inference to whoever holds an API key, the other lets a caller
// change the catalog, cordon nodes and read the cluster's shape.
export * from './routes.js';
export * from './views.js';
export * from './auth.js';
