// The builtin engine's socket listener, bounded like every listener llmgw
// runs. The engine binds the node's address so the gateway can reach it, so
// anyone on that network can open connections to it, and its API key is
// checked only once a request's headers are in. With Node's defaults a
// client could hold a connection silent for 60 s (checked every 30 s), a TLS
// handshake for 120 s, and open as many as the engine has file descriptors,
// after which the gateway could not reach it at all. Apart from server.ts,
// which is about answering requests, because none of this is.
import { createServer, type Server, type ServerOptions } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import { capConnections, reservedFiles } from '../../http/index.js';
import type { ServerTls } from '../../tls/index.js';

/** Connections beyond the requests the engine holds at once: a gateway's idle keep-alive ones, and new ones. */
const SPARE_CONNECTIONS = 64;
/** The fewest connections it holds, however small its open-file limit. */
const MIN_CONNECTIONS = 16;
/** A client's time to send its headers, and to finish a TLS handshake. */
const HEADERS_TIMEOUT_MS = 10_000;
/** A client's time to send a request's body once its headers are in (a chat is at most 8 MiB). */
const BODY_TIMEOUT_MS = 30_000;
/** At most one line a minute says connections are being closed at the cap. */
const CAP_LOG_INTERVAL_MS = 60_000;

/**
 * The most connections the engine holds: one for each request it can run or
 * queue (`parallel` + `maxQueue`; past those it refuses with 429 anyway) and
 * SPARE_CONNECTIONS more, within half of the open files the process does not
 * keep for itself (`openFiles` null = no known limit), and never under
 * MIN_CONNECTIONS. At the cap, a connection with no request in flight is
 * closed to make room (src/http/connections.ts), so a flood of silent ones
 * cannot shut the gateway out.
 */
export function engineConnectionCap(layout: { parallel: number; maxQueue: number }, openFiles: number | null): number {
  const wanted = layout.parallel + layout.maxQueue + SPARE_CONNECTIONS;
  if (openFiles === null) return wanted;
  return Math.max(MIN_CONNECTIONS, Math.min(wanted, Math.floor((openFiles - reservedFiles(openFiles)) / 2)));
}

/**
 * A listening server's bounds set before it listens: headers and a TLS
 * handshake within HEADERS_TIMEOUT_MS, a body within BODY_TIMEOUT_MS more
 * (Node times a request from its start, and stops once the request is in:
 * a long answer is not cut), checked every second, and the connection cap.
 * `log` gets one line a minute while the cap is closing connections.
 */
export function boundedEngineServer(
  tls: ServerTls | null,
  maxConnections: number,
  log: (line: string) => void,
  now: () => number = Date.now,
): Server | HttpsServer {
  const limits: ServerOptions = {
    headersTimeout: HEADERS_TIMEOUT_MS,
    requestTimeout: HEADERS_TIMEOUT_MS + BODY_TIMEOUT_MS,
    connectionsCheckingInterval: 1000,
  };
  const server = tls
    ? createHttpsServer({ ...limits, cert: tls.cert, key: tls.key, handshakeTimeout: HEADERS_TIMEOUT_MS })
    : createServer(limits);
  let closed = 0;
  let loggedAtMs = -Infinity;
  capConnections(server, {
    maxConnections,
    onRefused: () => {
      closed++;
      if (now() - loggedAtMs < CAP_LOG_INTERVAL_MS) return;
      loggedAtMs = now();
      log(
        `builtin engine at its connection cap (${maxConnections}): closed ${closed} connection(s) with no request in flight to make room; something is opening connections it does not use`,
      );
      closed = 0;
    },
  });
  return server;
}
