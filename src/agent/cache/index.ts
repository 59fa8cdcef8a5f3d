// The agent's weight cache: where fetched weights live, what is there, and the
// agent's side of "collect orphans" — removing an entry only after checking,
// itself, that the path is one this agent wrote. Separate from fetch because
// the cache owns the directory and its safety rules; fetch only fills it,
// through a temporary name the cache then renames into place.
export { WeightCache, type CacheEntry, type WeightCacheOptions } from './weight-cache.js';
export { FILES_DIR, MANIFEST_VERSION, type ManifestFile, type WeightManifest } from './manifest.js';
