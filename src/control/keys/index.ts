// API keys and what they spent: the records and the KeyStore and UsageSink
// interfaces the router depends on, their memory and stored implementations,
// and the admin routes over them. A part of its own so that the router needs
// nothing of the control plane but these interfaces, and the store nothing
// of the router: keys sit between the two, importing the store's types only.
export { MemoryKeyStore, issueKey, hashKey, keyView, type ApiKeyRecord, type KeyStore, type NewKey } from './keys.js';
export { MemoryUsageSink, type UsageEvent, type UsageSink, type UsageTotals } from './usage.js';
export { StoredKeys, StoredUsage, type UsageRow } from './stored.js';
export { registerKeyAdmin, registerUsageAdmin, type KeyAdminDeps, type UsageAdminDeps } from './admin.js';
