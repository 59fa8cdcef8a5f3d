// How many connections one listener holds, and which go first when it is
// full. Every connection costs the process a file descriptor, and a client
// that opens them and sends nothing spends nothing of its own: without a cap,
// a thousand silent connections took every descriptor and every listener
// with them (issue #33). Here rather than in Node's own server.maxConnections
// alone because a plain cap lets those same silent connections lock honest
// clients out until they time out; at the cap, a connection with no request
// in flight (silent since it opened, or idle between requests) is closed to
// make room, oldest first, so the listener keeps answering whoever sends a
// request promptly. The same bookkeeping lets a closing listener close those
// connections at once: Node's own close leaves a connection that never sent
// a request open, and stops the header timeout that would have ended it, so
// one silent client held a plane's shutdown for as long as it liked.
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Server, Socket } from 'node:net';
import { Counter, type Registry } from 'prom-client';

export interface ConnectionCapOptions {
  /** Most connections the listener holds at once; 0 = no cap. */
  maxConnections: number;
  /** Called once for each connection closed because the listener was at its cap (refused, or closed to make room). */
  onRefused?: () => void;
}

/** What a listener holds now (for tests and the start-up log), and how it lets go of it when it closes. */
export interface ConnectionCap {
  /** Connections open now. */
  open(): number;
  /** Connections with no request in flight now (the ones a newcomer may displace). */
  idle(): number;
  /**
   * The listener is closing: every connection with no request in flight
   * (silent since it opened, part-way through its headers, or idle between
   * requests) is closed now, and any that arrives from now on as it is
   * accepted. A request in flight keeps its connection until its answer ends.
   */
  closing(): void;
}

const kInFlight = Symbol('llmgw.inFlight');
const kRaw = Symbol('llmgw.rawSocket');

type Tracked = Socket & { [kInFlight]?: number };

/**
 * The TCP socket under a connection: the socket itself for plain HTTP; for
 * TLS, the socket the TLSSocket wraps (Node keeps it as `_parent`), which is
 * the one the server accepted, counted and will close.
 */
export function rawSocketOf(socket: Socket): Socket {
  const parent = (socket as Socket & { _parent?: unknown })._parent;
  return parent !== null && typeof parent === 'object' && typeof (parent as Socket).destroy === 'function'
    ? (parent as Socket)
    : socket;
}

/**
 * Caps `server` at `maxConnections`. A connection accepted past the cap
 * closes the oldest one with no request in flight, which is the newcomer
 * itself only when every other connection is busy. So the newest arrival
 * always gets its chance to send a request: an honest client loses its place
 * only to a flood that arrives within its own round trip. A connection whose
 * request is in flight (a long-polled heartbeat, a streaming answer) is never
 * closed here. Node's own server.maxConnections, one above, stays as a
 * backstop: what it refuses at accept is counted too. With no cap
 * (maxConnections 0) nothing is refused, and the connections are tracked
 * only for closing().
 */
export function capConnections(server: Server, options: ConnectionCapOptions): ConnectionCap {
  // Oldest first: a Set iterates in insertion order, and a connection moves to the end each time it falls idle.
  const idle = new Set<Tracked>();
  let open = 0;
  let closing = false;
  const cap = {
    open: () => open,
    idle: () => idle.size,
    closing: () => {
      closing = true;
      // Each one's 'close' (a later tick) takes it out of the set, so the set is not changed while it is walked.
      for (const socket of idle) socket.destroy();
    },
  };
  // No cap: the connections are still tracked, for closing().
  const capped = options.maxConnections > 0;
  const refused = options.onRefused ?? (() => {});
  if (capped) {
    server.maxConnections = options.maxConnections + 1;
    server.on('drop', refused);
  }

  server.on('connection', (socket: Tracked) => {
    // Accepted between closing() and the listener's own close: nothing was asked on it yet.
    if (closing) {
      socket.destroy();
      return;
    }
    // For TLS this is the accepted TCP socket; the server's TLS listener has already wrapped it.
    open++;
    idle.add(socket);
    socket.once('close', () => {
      open--;
      idle.delete(socket);
    });
    if (!capped || open <= options.maxConnections) return;
    // The newcomer was added last, so it goes only when no older connection is idle.
    const oldest = idle.values().next().value;
    if (oldest === undefined) return;
    idle.delete(oldest);
    oldest.destroy();
    refused();
  });

  function onResponseClose(this: ServerResponse & { [kRaw]?: Tracked }): void {
    const raw = this[kRaw];
    if (!raw) return;
    const left = (raw[kInFlight] ?? 1) - 1;
    raw[kInFlight] = left;
    if (left === 0 && !raw.destroyed) idle.add(raw);
  }

  server.on('request', (request: IncomingMessage, response: ServerResponse & { [kRaw]?: Tracked }) => {
    const raw = rawSocketOf(request.socket) as Tracked;
    raw[kInFlight] = (raw[kInFlight] ?? 0) + 1;
    idle.delete(raw);
    response[kRaw] = raw;
    response.once('close', onResponseClose);
  });
  return cap;
}

export type ListenerName = 'client' | 'admin' | 'agent';

/** Open files the process keeps for itself beyond its listeners: the store, engines and agents it calls, logs. */
export function reservedFiles(limit: number): number {
  return Math.max(64, Math.min(4096, Math.floor(limit / 10)));
}

/** The fewest connections a capped listener holds, however small the open-file limit. */
const MIN_CONNECTION_CAP = 16;

/**
 * The cap of a listener that is its process's only one (an agent's, an
 * engine's): `wanted`, lowered where the open-file limit is so small that it
 * would leave the process too few descriptors for its own work, to half of
 * what reservedFiles does not keep; never under 16. `openFiles` null = no
 * known limit, and the cap is `wanted`.
 */
export function capWithinOpenFiles(wanted: number, openFiles: number | null): number {
  if (openFiles === null) return wanted;
  return Math.max(MIN_CONNECTION_CAP, Math.min(wanted, Math.floor((openFiles - reservedFiles(openFiles)) / 2)));
}

/**
 * An onRefused for capConnections that says what happens once, not once per
 * connection: `warn` gets the connections closed since it last spoke, at
 * most once per `intervalMs` (a minute).
 */
export function throttledRefusals(
  warn: (closedSinceLast: number) => void,
  intervalMs = 60_000,
  now: () => number = Date.now,
): () => void {
  let closed = 0;
  let warnedAtMs = -Infinity;
  return () => {
    closed++;
    if (now() - warnedAtMs < intervalMs) return;
    warnedAtMs = now();
    warn(closed);
    closed = 0;
  };
}

/**
 * Caps that fit the process's open-file limit: the defaults scaled down
 * together when their sum and a reserve (reservedFiles) exceed it, each at
 * least 16. A cap the operator set (`set`) is kept as given, and the rest
 * share what it leaves. `limit` null (not Linux, or unreadable) = the caps
 * as they are.
 */
export function fitConnectionCaps(
  caps: Readonly<Record<ListenerName, number>>,
  set: ReadonlySet<ListenerName>,
  limit: number | null,
): { caps: Record<ListenerName, number>; lowered: boolean } {
  const out = { ...caps };
  if (limit === null) return { caps: out, lowered: false };
  const names = Object.keys(out) as ListenerName[];
  const fixed = names.filter((n) => set.has(n)).reduce((sum, n) => sum + out[n], 0);
  const free = names.filter((n) => !set.has(n) && out[n] > 0);
  const wanted = free.reduce((sum, n) => sum + out[n], 0);
  const room = limit - reservedFiles(limit) - fixed;
  if (wanted <= room) return { caps: out, lowered: false };
  for (const n of free) out[n] = Math.max(16, Math.floor((out[n] * Math.max(room, 0)) / wanted));
  return { caps: out, lowered: true };
}

/** The soft limit on this process's open files, from /proc/self/limits; null where it cannot be read or is unlimited. */
export function openFileLimit(read: (path: string) => string = (p) => readFileSync(p, 'utf8')): number | null {
  try {
    const line = read('/proc/self/limits')
      .split('\n')
      .find((l) => l.startsWith('Max open files'));
    const soft = line ? /^Max open files\s+(\d+|unlimited)/.exec(line)?.[1] : undefined;
    return soft === undefined || soft === 'unlimited' ? null : Number(soft);
  } catch {
    return null;
  }
}

/**
 * Registers `llmgw_listener_connections_refused_total{listener}` and returns,
 * per listener, the function that counts one. Each listener's series starts
 * at 0, so an alert can compare it before the first refusal.
 */
export function registerConnectionRefusals(registry: Registry): (listener: ListenerName) => () => void {
  const counter = new Counter({
    name: 'llmgw_listener_connections_refused_total',
    help: 'Connections a listener closed because it held its *_max_connections already: refused at accept, or closed with no request in flight to make room for a new one.',
    labelNames: ['listener'],
    registers: [registry],
  });
  return (listener) => {
    counter.inc({ listener }, 0);
    const child = counter.labels({ listener });
    return () => child.inc();
  };
}

/** The caps to listen with, and the start-up line that says why they differ from the configured ones (null = they do not). */
export function connectionCapsFor(
  configured: Readonly<Record<ListenerName, number>> & { readonly set: readonly ListenerName[] },
  limit: number | null,
): { caps: Record<ListenerName, number>; note: string | null } {
  const { client, admin, agent } = configured;
  const { caps, lowered } = fitConnectionCaps({ client, admin, agent }, new Set(configured.set), limit);
  if (!lowered) return { caps, note: null };
  return {
    caps,
    note:
      `connection caps lowered to fit this process's open-file limit (${limit}): client ${caps.client}, admin ${caps.admin}, agent ${caps.agent}; ` +
      'raise the limit (LimitNOFILE in the service unit, ulimit -n) for more, or set client/admin/agent_max_connections',
  };
}
