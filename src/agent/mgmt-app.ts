// The agent's management listener: the node's own API that its control
// plane calls across the network (a shard's log, weight removal, health).
// Built on src/http's createJsonApp as every control-plane listener is, so it
// has the same defences: headers and bodies in bounded time, a connection
// cap that a flood of silent connections cannot fill, a close that does not
// wait on them, and every refusal as {"error": "..."}. Apart from agent.ts so
// that the routes' tests build the listener exactly as the agent does.
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { bearerToken, capWithinOpenFiles, createJsonApp, sameSecret, throttledRefusals } from '../http/index.js';
import type { ServerTls } from '../tls/index.js';

/** Largest body a management call sends (a list of cache paths to remove). */
const MGMT_BODY_LIMIT_BYTES = 1 << 20;

/**
 * Connections the listener holds at most. Its callers are the fleet's
 * control planes, a few connections each; anything past this is a flood,
 * and the oldest connection with no request in flight makes room.
 */
const MGMT_MAX_CONNECTIONS = 128;

/** How long a caller has to send a request's headers, and then its body, ms: a control plane sends both at once. */
const MGMT_HEADERS_TIMEOUT_MS = 10_000;
const MGMT_BODY_TIMEOUT_MS = 30_000;

export interface MgmtAppOptions {
  logger: Logger;
  /** Certificate and key to serve TLS with; null = plain HTTP. */
  tls: ServerTls | null;
  /** The node's management token now; undefined = none issued yet, and every call is refused. */
  token: () => string | undefined;
  /** The process's soft limit on open files (openFileLimit()); null = unknown, and the cap is MGMT_MAX_CONNECTIONS. */
  openFiles: number | null;
}

/**
 * The connection cap for a process allowed `openFiles` descriptors: the
 * usual cap, lowered where the limit is so small that it would leave the
 * agent too few for its engines' pipes, its downloads and its heartbeats;
 * never under 16.
 */
export function mgmtConnectionCap(openFiles: number | null): number {
  return capWithinOpenFiles(MGMT_MAX_CONNECTIONS, openFiles);
}

/**
 * The management listener, every route behind the node's management token.
 * The check runs on every request, matched or not, before any route's
 * handler: a route added later is behind it without saying so, and a caller
 * without the token learns nothing of which paths exist.
 */
export function createMgmtApp(options: MgmtAppOptions): FastifyInstance {
  const cap = mgmtConnectionCap(options.openFiles);
  const app = createJsonApp({
    logger: options.logger,
    bodyLimitBytes: MGMT_BODY_LIMIT_BYTES,
    https: options.tls,
    headersTimeoutMs: MGMT_HEADERS_TIMEOUT_MS,
    bodyTimeoutMs: MGMT_BODY_TIMEOUT_MS,
    maxConnections: cap,
    onConnectionRefused: throttledRefusals((closed) =>
      options.logger.warn(
        { max_connections: cap, closed_since_last_warning: closed },
        'management listener at its connection cap: the oldest connections with no request in flight are closed to make room',
      ),
    ),
  });
  app.addHook('onRequest', async (req, reply) => {
    const token = options.token();
    const given = bearerToken(req.headers.authorization);
    if (token !== undefined && given !== null && sameSecret(given, token)) return;
    req.log.warn(
      { ip: req.ip, url: req.url.split('?')[0] },
      "management call refused: not from this node's control plane",
    );
    return reply.code(401).send({ error: "only this node's control plane may call its management API" });
  });
  return app;
}
