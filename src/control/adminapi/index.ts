// The admin API: the control plane's management surface, on the admin
// listener rather than the client one because the audiences differ: one
// serves inference to whoever holds an API key, the other lets a caller
// change the catalog, cordon nodes and read the cluster's shape.
export { changeNodeState, registerAdminApi, type AdminApiOptions } from './routes.js';
export { planView } from './plan-and-logs.js';
export { nodeDisksView } from './disks.js';
export { requestMissing, requestsView, requestFilter, type RequestsApiDeps } from './requests.js';
export { explainView, modelViews, nodeDetailView, nodeViews, replicaViews, summaryView } from './views.js';
export { ADMIN_TOKEN_IDENTITY, AdminGuard } from './auth.js';
export {
  auditEntryView,
  auditSummary,
  auditView,
  registerAuditApi,
  type AuditQuery,
  type AuditSource,
} from './audit.js';
export { nodeViewPage, parseNodeQuery, type NodePage, type NodeQuery } from './node-query.js';
