// Where a redirect may send the agent. A weight source is chosen by an
// operator, but the server behind it chooses where its redirects go, and the
// agent sits inside the operator's network: a public server that answers 302
// to http://169.254.169.254/ or http://10.0.0.5:8500/ would have the agent
// fetch from the cloud's metadata service or an internal API and, for hub
// files, report what it read as progress and errors. So a redirect may leave
// a public source only for public addresses, and a source on a private or
// loopback address only for public addresses or its own class (tests serve
// weights on 127.0.0.1 and redirect within it). Names are resolved here and
// the connection is made to exactly the addresses that were checked, so a
// name that resolves differently the second time (DNS rebinding) gains
// nothing.
import { lookup as dnsLookup } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import { Agent } from 'undici';

/** What an address reaches: 'public' is anything not in one of the other ranges. */
export type AddressClass = 'public' | 'loopback' | 'private' | 'link-local' | 'unspecified' | 'reserved';

/** Resolves a host name to every address it has (IPv4 and IPv6, as the resolver gives them). */
export type HostLookup = (hostname: string) => Promise<string[]>;

export const systemLookup: HostLookup = (hostname) =>
  new Promise((resolve, reject) => {
    dnsLookup(hostname, { all: true, verbatim: true }, (err, addresses) =>
      err ? reject(err) : resolve(addresses.map((a) => a.address)),
    );
  });

/** The class of an IPv4 or IPv6 address in text form; 'reserved' for text that is neither. */
export function addressClass(address: string): AddressClass {
  const ip = address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address;
  if (isIP(ip) === 4) return ipv4Class(ipv4Octets(ip));
  if (isIP(ip) === 6) return ipv6Class(ipv6Words(ip));
  return 'reserved';
}

function ipv4Octets(ip: string): number[] {
  return ip.split('.').map(Number);
}

function ipv4Class(o: readonly number[]): AddressClass {
  const [a = 0, b = 0] = o;
  if (a === 127) return 'loopback';
  // 0.0.0.0/8 is "this host" to Linux's connect(): it reaches the loopback interface's listeners and more.
  if (a === 0) return 'unspecified';
  if (a === 10 || (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168)) return 'private';
  // Carrier-grade NAT space is as internal to a cloud network as RFC 1918 space.
  if (a === 100 && b >= 64 && b <= 127) return 'private';
  if (a === 169 && b === 254) return 'link-local';
  // 192.0.0/24 protocol assignments, 198.18/15 benchmarking, multicast, 240/4 and broadcast: nothing a weight server lives on.
  if ((a === 192 && b === 0 && o[2] === 0) || (a === 198 && (b === 18 || b === 19)) || a >= 224) return 'reserved';
  return 'public';
}

/** Eight 16-bit words; an embedded dotted IPv4 tail (::ffff:1.2.3.4) becomes the last two. */
function ipv6Words(ip: string): number[] {
  let text = ip.split('%')[0]!;
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const [a = 0, b = 0, c = 0, d = 0] = ipv4Octets(dotted[1]!);
    text = `${text.slice(0, -dotted[1]!.length)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((w) => parseInt(w, 16)));
  const front = parse(head);
  const back = tail === undefined ? [] : parse(tail);
  return [...front, ...new Array<number>(8 - front.length - back.length).fill(0), ...back];
}

function ipv6Class(w: readonly number[]): AddressClass {
  const at = (i: number) => w[i] ?? 0;
  const embeddedV4 = (hi: number, lo: number) => [at(hi) >> 8, at(hi) & 0xff, at(lo) >> 8, at(lo) & 0xff];
  const zeroUpTo = (n: number) => w.slice(0, n).every((x) => x === 0);
  if (zeroUpTo(7) && at(7) === 1) return 'loopback';
  if (zeroUpTo(8)) return 'unspecified';
  // IPv4-mapped (::ffff:a.b.c.d) and the deprecated IPv4-compatible (::a.b.c.d) forms reach the IPv4 address itself.
  if (zeroUpTo(5) && at(5) === 0xffff) return ipv4Class(embeddedV4(6, 7));
  if (zeroUpTo(6)) return ipv4Class(embeddedV4(6, 7));
  // NAT64 (64:ff9b::/96) and 6to4 (2002::/16) carry an IPv4 address a gateway will connect to.
  if (at(0) === 0x64 && at(1) === 0xff9b && w.slice(2, 6).every((x) => x === 0)) return ipv4Class(embeddedV4(6, 7));
  if (at(0) === 0x2002) return ipv4Class(embeddedV4(1, 2));
  if ((at(0) & 0xffc0) === 0xfe80) return 'link-local';
  // Unique local addresses, and the site-local range they replaced.
  if ((at(0) & 0xfe00) === 0xfc00 || (at(0) & 0xffc0) === 0xfec0) return 'private';
  if ((at(0) & 0xff00) === 0xff00) return 'reserved';
  return 'public';
}

/** The addresses a URL's host stands for: itself when it is an address, else what the lookup answers. */
export async function addressesOf(url: URL, lookup: HostLookup): Promise<string[]> {
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  if (isIP(host)) return [host];
  const addresses = await lookup(host);
  if (addresses.length === 0) throw new Error(`${host} resolves to no address`);
  return addresses;
}

/**
 * The classes a source's redirects may reach besides public addresses: its
 * own class when every address it resolves to is of that one class, else
 * none. A name answering with a public and a private address (or a
 * different one each time it is asked) would otherwise let its public
 * server redirect into the private network.
 */
export function sourceClasses(sourceAddresses: readonly string[]): Set<AddressClass> {
  const classes = new Set(sourceAddresses.map(addressClass));
  return classes.size === 1 ? classes : new Set();
}

/**
 * The first address a redirect must not go to, with its class, or null when
 * all may be reached: public addresses always, others only in a class the
 * source itself is in.
 */
export function forbiddenHop(
  hopAddresses: readonly string[],
  sourceClasses: ReadonlySet<AddressClass>,
): { address: string; cls: AddressClass } | null {
  for (const address of hopAddresses) {
    const cls = addressClass(address);
    if (cls !== 'public' && !sourceClasses.has(cls)) return { address, cls };
  }
  return null;
}

/** A refused hop in words: "10.0.0.7, a private address". */
export function refusedAddress(bad: { address: string; cls: AddressClass }): string {
  return `${bad.address}, ${/^[aeiou]/.test(bad.cls) ? 'an' : 'a'} ${bad.cls} address`;
}

/**
 * A dispatcher that connects only to `addresses` whatever its host name
 * resolves to by then (TLS still checks the certificate against the name).
 * One per hop; closed by the caller once the answer has been read.
 */
export function pinnedAgent(addresses: readonly string[]): Agent {
  const pinned = addresses.map((address) => ({ address, family: isIP(address) }));
  const lookup: LookupFunction = (_hostname, options, callback) => {
    if (options.all) return (callback as unknown as (err: null, all: typeof pinned) => void)(null, pinned);
    const first = pinned.find((a) => !options.family || a.family === options.family) ?? pinned[0]!;
    callback(null, first.address, first.family);
  };
  return new Agent({ connect: { lookup } });
}
