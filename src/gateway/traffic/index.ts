// Traffic rules on the request path: a split sends each request for a
// model to one of several models by weight (split.ts, pure, at intake), and
// a shadow copies a sampled share of a model's requests to a candidate,
// compares the two sides and discards the copy's answer (shadow.ts sends,
// board.ts keeps the comparison). Its own folder because none of it decides
// which replica serves a request, and the core only calls in here.
export { chooseSplit, pickByWeight, sampledForShadow, splitPoint, stickyPoint, type SplitChoice } from './split.js';
export { SHADOW_SAMPLES_KEPT, ShadowBoard, type DropReason, type SideSample } from './board.js';
export { ShadowRunner, shadowPlan, usageOf, type ShadowCopy, type ShadowPlan } from './shadow.js';
export { SplitDraws } from './draws.js';
export { routeRequest, type RoutedRequest } from './route.js';
