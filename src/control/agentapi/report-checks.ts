// Checks on the addresses a node reports: its management address (where the
// control plane sends collect and log calls, with the node's bearer) and its
// shards' endpoints (where the router sends clients' prompts). Believed
// blindly, either lets whoever holds a join token point the control plane at
// any address it can reach: an endpoint with a path made the router POST
// prompts to another service and relay its answer. Pure functions, separate
// from the routes, so the rules are read and tested in one place.
//
// The rules: an address is `host:port` (an endpoint may also be written
// `http://host:port` or `https://host:port`, with nothing after the port but
// an optional "/": no path, query, fragment or userinfo). The host is the
// address the node reports from, or the engine host it declares; a loopback
// host only from a node that itself reports from loopback (otherwise the
// control plane would call itself); a wildcard (0.0.0.0, ::) never. An
// endpoint's port lies inside the port range the node declares. An older
// agent declares neither engine host nor port range: then the host must be
// the report's source address, and any port is taken. The management port
// is not held to the engine range: the agent binds it apart from its
// engines (a free port by default).
import { isIP } from 'node:net';

/** What the control plane knows of where a node may listen, at the moment of one join or heartbeat. */
export interface NodeAddressing {
  /** The address the join or heartbeat came from (the listener's `request.ip`). */
  readonly sourceAddr: string;
  /** The host the agent says its engines are reached at; null = not declared (an older agent). */
  readonly engineHost: string | null;
  /** The agent's engine ports, inclusive; null = not declared (an older agent: any port). */
  readonly portRange: { readonly first: number; readonly last: number } | null;
}

export type AddressCheck =
  | { readonly ok: true; /** The address as the control plane will use it (an endpoint always as scheme://host:port). */ readonly value: string }
  | { readonly ok: false; /** A sentence naming what is wrong and what is allowed. */ readonly reason: string };

interface HostPort {
  readonly scheme: 'http' | 'https' | null;
  /** Lower case, IPv6 without brackets. */
  readonly host: string;
  readonly port: number;
}

const HOST_PORT = /^(?:(https?):\/\/)?(?:\[([0-9a-fA-F:.]+)\]|([A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?)):(\d{1,5})(\/?)$/;

/** `[scheme://]host:port[/]`, or null for anything else (a path, a query, userinfo, a missing port). */
export function parseHostPort(text: string): HostPort | null {
  const m = HOST_PORT.exec(text);
  if (!m) return null;
  const port = Number(m[4]);
  if (port < 1 || port > 65535) return null;
  const v6 = m[2];
  if (v6 !== undefined && isIP(v6) !== 6) return null;
  // A trailing "/" is only meaningful after a scheme; "host:port/" is as wrong as any other path.
  if (m[5] === '/' && m[1] === undefined) return null;
  return { scheme: (m[1]?.toLowerCase() as 'http' | 'https' | undefined) ?? null, host: unmapped((v6 ?? m[3]!).toLowerCase()), port };
}

/** The management address a node gives at join (`mgmt_addr`), checked. */
export function checkMgmtAddr(text: string, node: NodeAddressing): AddressCheck {
  const parsed = parseHostPort(text);
  if (!parsed || parsed.scheme !== null) {
    return { ok: false, reason: `mgmt_addr ${JSON.stringify(text.slice(0, 120))} is not host:port (no scheme, path or query); the agent's --mgmt-addr gives it` };
  }
  const hostProblem = checkHost(parsed.host, node);
  if (hostProblem) return { ok: false, reason: `mgmt_addr ${text}: ${hostProblem}` };
  return { ok: true, value: joinHostPort(parsed.host, parsed.port) };
}

/** A shard's reported `endpoint`, checked; the value is the endpoint the router may use. */
export function checkShardEndpoint(text: string, node: NodeAddressing): AddressCheck {
  const parsed = parseHostPort(text);
  if (!parsed) {
    return { ok: false, reason: `endpoint ${JSON.stringify(text.slice(0, 120))} is not http://host:port (no path, query or userinfo)` };
  }
  const hostProblem = checkHost(parsed.host, node);
  if (hostProblem) return { ok: false, reason: `endpoint ${text}: ${hostProblem}` };
  const range = node.portRange;
  if (range && (parsed.port < range.first || parsed.port > range.last)) {
    return { ok: false, reason: `endpoint ${text}: port ${parsed.port} is outside the node's engine port range ${range.first}-${range.last}` };
  }
  return { ok: true, value: `${parsed.scheme ?? 'http'}://${joinHostPort(parsed.host, parsed.port)}` };
}

/**
 * What the agent declared about its engines, read leniently from a join body
 * or a report (unknown shapes are "not declared", never an error: an older
 * or odd agent falls back to the strictest rule, its source address).
 */
export function declaredAddressing(from: unknown, sourceAddr: string): NodeAddressing {
  const o = from !== null && typeof from === 'object' ? (from as Record<string, unknown>) : {};
  const host = typeof o.engine_host === 'string' ? o.engine_host.trim().toLowerCase().replace(/^\[|\]$/g, '') : '';
  const r = o.port_range !== null && typeof o.port_range === 'object' ? (o.port_range as Record<string, unknown>) : null;
  const first = r ? r.first : undefined;
  const last = r ? r.last : undefined;
  const validPort = (p: unknown): p is number => typeof p === 'number' && Number.isInteger(p) && p >= 1 && p <= 65535;
  return {
    sourceAddr,
    // A wildcard is where engines bind, not where anyone reaches them: as good as not declared.
    engineHost: host && !isWildcard(host) ? unmapped(host) : null,
    portRange: validPort(first) && validPort(last) && first <= last ? { first, last } : null,
  };
}

/** Why `host` is not one of the node's own addresses; null when it is. */
function checkHost(host: string, node: NodeAddressing): string | null {
  if (isWildcard(host)) return `${host} is a wildcard address, which names no machine; report the address the control plane reaches the node at`;
  const source = unmapped(node.sourceAddr.toLowerCase());
  if (isLoopback(host)) {
    return isLoopback(source) ? null : `a loopback host reported by a node that reports from ${source} would make the control plane call itself`;
  }
  if (host === source || (node.engineHost !== null && host === node.engineHost)) return null;
  const allowed = node.engineHost !== null && node.engineHost !== source ? `${source} (where it reports from) or ${node.engineHost} (its engine host)` : `${source}, where it reports from`;
  return `host ${host} is not the node's own address; it may be ${allowed}`;
}

function isWildcard(host: string): boolean {
  return host === '0.0.0.0' || host === '::' || host === '0:0:0:0:0:0:0:0';
}

function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  return host === '::1';
}

/** An IPv4 address as a dual-stack listener shows it (::ffff:10.0.0.5) in its own form. */
function unmapped(host: string): string {
  const m = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(host);
  return m ? m[1]! : host;
}

function joinHostPort(host: string, port: number): string {
  return `${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/** A shard status as far as these checks read it (the wire type's fields they touch). */
interface ReportedShard {
  readonly shard_id: string;
  readonly endpoint?: string | undefined;
  readonly error?: string | undefined;
}

/**
 * A heartbeat's shard statuses with every endpoint checked: a taken one in
 * its normal form; a refused one removed, with the reason as the shard's
 * error, so the replica has no endpoint to route to and the operator sees
 * why. `refused` lists each refusal for the log.
 */
export function screenShards<S extends ReportedShard>(shards: readonly S[], node: NodeAddressing): { shards: S[]; refused: { shardId: string; reason: string }[] } {
  const refused: { shardId: string; reason: string }[] = [];
  const out = shards.map((s): S => {
    if (s.endpoint === undefined) return s;
    const check = checkShardEndpoint(s.endpoint, node);
    if (check.ok) return check.value === s.endpoint ? s : { ...s, endpoint: check.value };
    refused.push({ shardId: s.shard_id, reason: check.reason });
    const { endpoint: _refused, ...rest } = s;
    return { ...rest, error: `the control plane refused this shard's ${check.reason}; it is not routed to` } as unknown as S;
  });
  return { shards: out, refused };
}

/**
 * Whether a stored management address is plain host:port, checked again
 * where it is called: an address stored before these checks existed (or by
 * an older control plane on the same store) is not trusted either.
 */
export function usableMgmtAddr(addr: string): boolean {
  const parsed = parseHostPort(addr);
  return parsed !== null && parsed.scheme === null;
}
