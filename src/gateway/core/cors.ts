// Which browser apps may call the client listener, as @fastify/cors reads
// it. Its own file because it is the listener's policy toward browsers,
// not part of any request's way through the gateway.

/**
 * @fastify/cors options for the client listener, when `origins` may call it
 * from a browser ('*' = any). Keys travel in Authorization, never in
 * cookies, so there is no credentials mode; the headers a browser app reads
 * (request id, Retry-After, rate limits) are exposed to it.
 */
export function clientCorsOptions(origins: readonly string[]) {
  return {
    origin: origins.includes('*') ? '*' : [...origins],
    methods: ['GET', 'POST', 'DELETE', 'OPTIONS'],
    exposedHeaders: [
      'x-request-id',
      'retry-after',
      'x-ratelimit-limit-requests',
      'x-ratelimit-remaining-requests',
      'x-ratelimit-limit-tokens',
      'x-ratelimit-remaining-tokens',
      'x-llmgw-fallback-skipped',
    ],
    maxAge: 600,
    // A bare OPTIONS (no Origin) goes on to the routes and is answered in the listener's shape, not as a refused preflight.
    strictPreflight: false,
  };
}
