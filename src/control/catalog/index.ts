// The catalog: which models exist, how each may be run (profiles), and what
// to serve instead (fallbacks). The source of the wanted set for placement,
// the reconciler and weight collection alike.
export { Catalog } from './catalog.js';
export { compileModel, ModelSchema, type Model } from './model.js';
export {
  API_ENDPOINTS,
  ENGINE_ENDPOINTS,
  SERVED_ENDPOINTS,
  endpointNeeds,
  endpointsOfEngines,
  modelServes,
  type Endpoint,
  type ServedEndpoint,
} from './endpoints.js';
