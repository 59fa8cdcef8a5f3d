// The gateway's HTTP/1.1 client to engines on plain HTTP: keep-alive
// connections per endpoint and a response reader that hands the body on as
// the socket's own bytes. Separate from undici, which the gateway keeps for
// https engines and whole-body requests, because an attempt is the hot path:
// undici's general machinery (a request object, its parser in WebAssembly,
// a timer per request) cost more CPU per request than all of the gateway's
// own work, and this client pays a fraction of it (bench/router.mjs).
export { EnginePool, type EnginePoolOptions } from './pool.js';
export { EngineRequestError, type EngineRequest } from './request.js';
export { ResponseReader, ResponseFramingError, MAX_HEAD_BYTES, type ResponseSink } from './response-reader.js';
