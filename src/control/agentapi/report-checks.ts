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
// an optional "/": no path, query, fragment or userinfo). The host is an IP
// address in its plain form (dotted quad or IPv6), never a name: a name is
// resolved again at each call and may point anywhere by then (DNS
// rebinding), and odd IPv4 spellings (127.1, 2130706433, 0x7f.1, 0) resolve
// to loopback or the wildcard past any text comparison. Addresses are
// compared normalised (::ffff:10.0.0.5 is 10.0.0.5). The host is the address
// the node reports from, or the engine host it declares; a loopback host
// (127.0.0.0/8, ::1) only from a node that itself reports from loopback
// (otherwise the control plane would call itself); an unspecified (0.0.0.0,
// ::), link-local (169.254.0.0/16, fe80::/10: where cloud metadata answers)
// or multicast address never. An endpoint's port lies inside the port range
// the node declares. An older agent declares neither engine host nor port
// range: then the host must be the report's source address, and any port is
// taken. The management port is not held to the engine range: the agent
// binds it apart from its engines (a free port by default).
import { BlockList, isIP } from 'node:net';

/** What the control plane knows of where a node may listen, at the moment of one join or heartbeat. */
export interface NodeAddressing {
  /** The address the join or heartbeat came from (the listener's `request.ip`). */
  readonly sourceAddr: string;
  /** The host the agent says its engines are reached at, a normalised IP address; null = not declared (an older agent) or not taken. */
  readonly engineHost: string | null;
  /** Why a declared engine host was not taken (it was not an IP address), for the refusals it causes; absent = nothing to say. */
  readonly engineHostIgnored?: string | undefined;
  /** The agent's engine ports, inclusive; null = not declared (an older agent: any port). */
  readonly portRange: { readonly first: number; readonly last: number } | null;
}

export type AddressCheck =
  | {
      readonly ok: true;
      /** The address as the control plane will use it (an endpoint always as scheme://host:port). */ readonly value: string;
    }
  | { readonly ok: false; /** A sentence naming what is wrong and what is allowed. */ readonly reason: string };

interface HostPort {
  readonly scheme: 'http' | 'https' | null;
  /** An IP address normalised (see normalIp), or else the name as written, lower case: refused by the checks. */
  readonly host: string;
  readonly port: number;
}

const HOST_PORT =
  /^(?:(https?):\/\/)?(?:\[([0-9a-fA-F:.]+)\]|([A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?)):(\d{1,5})(\/?)$/;

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
  const host = (v6 ?? m[3]!).toLowerCase();
  return { scheme: (m[1]?.toLowerCase() as 'http' | 'https' | undefined) ?? null, host: normalIp(host) ?? host, port };
}

/** The management address a node gives at join (`mgmt_addr`), checked. */
export function checkMgmtAddr(text: string, node: NodeAddressing): AddressCheck {
  const parsed = parseHostPort(text);
  if (!parsed || parsed.scheme !== null) {
    return {
      ok: false,
      reason: `mgmt_addr ${JSON.stringify(text.slice(0, 120))} is not host:port (no scheme, path or query); the agent's --mgmt-addr gives it`,
    };
  }
  const hostProblem = checkHost(parsed.host, node);
  if (hostProblem) return { ok: false, reason: `mgmt_addr ${text}: ${hostProblem}` };
  return { ok: true, value: joinHostPort(parsed.host, parsed.port) };
}

/** A shard's reported `endpoint`, checked; the value is the endpoint the router may use. */
export function checkShardEndpoint(text: string, node: NodeAddressing): AddressCheck {
  const parsed = parseHostPort(text);
  if (!parsed) {
    return {
      ok: false,
      reason: `endpoint ${JSON.stringify(text.slice(0, 120))} is not http://host:port (no path, query or userinfo)`,
    };
  }
  const hostProblem = checkHost(parsed.host, node);
  if (hostProblem) return { ok: false, reason: `endpoint ${text}: ${hostProblem}` };
  const range = node.portRange;
  if (range && (parsed.port < range.first || parsed.port > range.last)) {
    return {
      ok: false,
      reason: `endpoint ${text}: port ${parsed.port} is outside the node's engine port range ${range.first}-${range.last}`,
    };
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
  const host =
    typeof o.engine_host === 'string'
      ? o.engine_host
          .trim()
          .toLowerCase()
          .replace(/^\[|\]$/g, '')
      : '';
  const r =
    o.port_range !== null && typeof o.port_range === 'object' ? (o.port_range as Record<string, unknown>) : null;
  const first = r ? r.first : undefined;
  const last = r ? r.last : undefined;
  const validPort = (p: unknown): p is number => typeof p === 'number' && Number.isInteger(p) && p >= 1 && p <= 65535;
  const ip = host ? normalIp(host) : null;
  return {
    sourceAddr,
    // A wildcard is where engines bind, not where anyone reaches them: as good as not declared.
    engineHost: ip !== null && kindOf(ip) !== 'unspecified' ? ip : null,
    ...(host && ip === null
      ? {
          engineHostIgnored: `its declared engine host ${JSON.stringify(host.slice(0, 80))} is not an IP address, so it was not taken`,
        }
      : {}),
    portRange: validPort(first) && validPort(last) && first <= last ? { first, last } : null,
  };
}

type AddressKind = 'loopback' | 'unspecified' | 'link-local' | 'multicast' | 'other';

const SPECIAL = new Map<Exclude<AddressKind, 'other'>, BlockList>();
for (const [kind, ranges] of [
  [
    'loopback',
    [
      ['127.0.0.0', 8, 'ipv4'],
      ['::1', 128, 'ipv6'],
    ],
  ],
  // 0.0.0.0/8 is "this network": no machine, and a connect to it reaches this one.
  [
    'unspecified',
    [
      ['0.0.0.0', 8, 'ipv4'],
      ['::', 128, 'ipv6'],
    ],
  ],
  [
    'link-local',
    [
      ['169.254.0.0', 16, 'ipv4'],
      ['fe80::', 10, 'ipv6'],
    ],
  ],
  [
    'multicast',
    [
      ['224.0.0.0', 4, 'ipv4'],
      ['255.255.255.255', 32, 'ipv4'],
      ['ff00::', 8, 'ipv6'],
    ],
  ],
] as const) {
  const list = new BlockList();
  for (const [net, prefix, family] of ranges) list.addSubnet(net, prefix, family);
  SPECIAL.set(kind, list);
}

/** What kind of address a normalised IP address is. */
function kindOf(ip: string): AddressKind {
  const family = isIP(ip) === 6 ? 'ipv6' : 'ipv4';
  for (const [kind, list] of SPECIAL) if (list.check(ip, family)) return kind;
  return 'other';
}

/**
 * An IP address in one form per address, so that two spellings compare
 * equal: IPv4 as a dotted quad (Node's isIP takes no octal, hex or short
 * forms), IPv6 lower case and compressed, an IPv4-mapped IPv6 address
 * (::ffff:10.0.0.5, ::ffff:a00:5) as its IPv4 address. Null: not an IP address.
 */
export function normalIp(text: string): string | null {
  const bare = text.replace(/^\[|\]$/g, '');
  const family = isIP(bare);
  if (family === 4) return bare;
  if (family !== 6 || bare.includes('%')) return null;
  let v6: string;
  try {
    v6 = new URL(`http://[${bare}]/`).hostname.slice(1, -1);
  } catch {
    return null;
  }
  const mapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(v6);
  if (!mapped) return v6;
  const hi = parseInt(mapped[1]!, 16);
  const lo = parseInt(mapped[2]!, 16);
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

/** Why `host` is not one of the node's own addresses; null when it is. */
function checkHost(host: string, node: NodeAddressing): string | null {
  const ip = normalIp(host);
  if (ip === null) {
    return `host ${host} is not an IP address (a name may resolve elsewhere by the time it is called, and only plain IPv4 and IPv6 forms are taken); report the node's IP address, e.g. with the agent's --advertise-host`;
  }
  const source = normalIp(node.sourceAddr) ?? node.sourceAddr.toLowerCase();
  switch (kindOf(ip)) {
    case 'unspecified':
      return `${ip} is a wildcard address, which names no machine; report the address the control plane reaches the node at`;
    case 'link-local':
      return `${ip} is link-local (169.254.0.0/16, fe80::/10), where cloud metadata services answer; report the address the control plane reaches the node at`;
    case 'multicast':
      return `${ip} is a multicast or broadcast address, which names no one machine; report the address the control plane reaches the node at`;
    case 'loopback':
      return isIP(source) !== 0 && kindOf(source) === 'loopback'
        ? null
        : `a loopback host reported by a node that reports from ${source} would make the control plane call itself`;
    case 'other':
      break;
  }
  const engineHost = node.engineHost === null ? null : normalIp(node.engineHost);
  if (ip === source || (engineHost !== null && ip === engineHost)) return null;
  const allowed =
    engineHost !== null && engineHost !== source
      ? `${source} (where it reports from) or ${engineHost} (its engine host)`
      : `${source}, where it reports from`;
  return `host ${ip} is not the node's own address; it may be ${allowed}${node.engineHostIgnored ? ` (${node.engineHostIgnored}: report an IP address, e.g. with the agent's --advertise-host)` : ''}`;
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
export function screenShards<S extends ReportedShard>(
  shards: readonly S[],
  node: NodeAddressing,
): { shards: S[]; refused: { shardId: string; reason: string }[] } {
  const refused: { shardId: string; reason: string }[] = [];
  const out = shards.map((s): S => {
    if (s.endpoint === undefined) return s;
    const check = checkShardEndpoint(s.endpoint, node);
    if (check.ok) return check.value === s.endpoint ? s : { ...s, endpoint: check.value };
    refused.push({ shardId: s.shard_id, reason: check.reason });
    const { endpoint: _refused, ...rest } = s;
    return {
      ...rest,
      error: `the control plane refused this shard's ${check.reason}; it is not routed to`,
    } as unknown as S;
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
  if (parsed === null || parsed.scheme !== null || isIP(parsed.host) === 0) return false;
  const kind = kindOf(parsed.host);
  // Loopback is left to the join's check, which knew where the node reported from.
  return kind === 'other' || kind === 'loopback';
}
