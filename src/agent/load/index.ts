// Engine load on the agent: each ready engine's Prometheus metrics read every
// second and reduced to running, waiting, KV-cache use and the prefix cache's
// hit rate, for the heartbeat to carry to the router. Apart from the supervisor (which owns processes,
// not what they say about their queues) and from the heartbeat loop (which
// must never wait on an engine).
export { parseEngineLoad, type EngineLoad } from './parse.js';
export { KV_PRESSURE, LoadScraper, differs, type LoadScraperOptions, type ScrapeTarget } from './scraper.js';
