// Fetching weights onto this machine: hf:// through the hub's API (or a
// mirror), https:// with resume, file:// used where it is. Separate from the
// cache because fetching is about the network (sources, credentials, resume,
// progress) while the cache owns the directory; fetch writes only through the
// cache's temporary name and asks the cache to rename the result into place.
export { Fetcher, displaySource, type FetchOptions, type FetchResult, type FetcherOptions } from './fetcher.js';
export { type FetchProgress } from './progress.js';
