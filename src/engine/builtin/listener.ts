// The builtin engine's socket listener, bounded like every listener llmgw
// runs. The engine binds the node's address so the gateway can reach it, so
// anyone on that network can open connections to it, and its API key is
// checked only once a request's headers are in. With Node's defaults a
// client could hold a connection silent for 60 s (checked every 30 s), a TLS
// handshake for 120 s, and open as many as the engine has file descriptors,
// after which the gateway could not reach it at all. Apart from server.ts,
// which is about answering requests, because none of this is.
import { createServer, type Server } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import { boundedTimeouts, capConnections, capWithinOpenFiles, throttledRefusals } from '../../http/index.js';
import type { ServerTls } from '../../tls/index.js';

/** Connections beyond the requests the engine holds at once: a gateway's idle keep-alive ones, and new ones. */
const SPARE_CONNECTIONS = 64;
/** A client's time to send its headers, and to finish a TLS handshake. */
const HEADERS_TIMEOUT_MS = 10_000;
/** A client's time to send a request's body once its headers are in (a chat is at most 8 MiB). */
const BODY_TIMEOUT_MS = 30_000;

/**
 * The most connections the engine holds: one for each request it can run or
 * queue (`parallel` + `maxQueue`; past those it refuses with 429 anyway) and
 * SPARE_CONNECTIONS more, fitted to the open-file limit (capWithinOpenFiles;
 * `openFiles` null = no known limit). At the cap, a connection with no
 * request in flight is closed to make room (src/http/connections.ts), so a
 * flood of silent ones cannot shut the gateway out.
 */
export function engineConnectionCap(layout: { parallel: number; maxQueue: number }, openFiles: number | null): number {
  return capWithinOpenFiles(layout.parallel + layout.maxQueue + SPARE_CONNECTIONS, openFiles);
}

/**
 * A server bounded before it listens: headers and a TLS handshake within
 * HEADERS_TIMEOUT_MS, a body within BODY_TIMEOUT_MS more (boundedTimeouts),
 * and the connection cap. `log` gets one line a minute while the cap is
 * closing connections.
 */
export function boundedEngineServer(
  tls: ServerTls | null,
  maxConnections: number,
  log: (line: string) => void,
): Server | HttpsServer {
  const limits = boundedTimeouts(HEADERS_TIMEOUT_MS, BODY_TIMEOUT_MS);
  const server = tls
    ? createHttpsServer({ ...limits, cert: tls.cert, key: tls.key, handshakeTimeout: HEADERS_TIMEOUT_MS })
    : createServer(limits);
  capConnections(server, {
    maxConnections,
    onRefused: throttledRefusals((closed) =>
      log(
        `builtin engine at its connection cap (${maxConnections}): closed ${closed} connection(s) with no request in flight to make room; something is opening connections it does not use`,
      ),
    ),
  });
  return server;
}
