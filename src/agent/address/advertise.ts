// The address a node is reached at. Engines and the management API may bind
// a wildcard (0.0.0.0, ::) so that any interface serves them, but a wildcard
// is nowhere to send a request: the control plane needs one address, and it
// accepts only the address the node reports from or the engine host it
// declares. So, unless the operator names one (--advertise-host), the agent
// asks the kernel which local address its route to the control plane leaves
// from: the address the control plane sees its heartbeats come from.
import { createSocket } from 'node:dgram';
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { isWildcardHost } from '../../net/index.js';

/**
 * The local address this machine would send from to reach `url`'s host;
 * null when the host does not resolve or no route leads there. A UDP
 * connect only asks the routing table: nothing is sent.
 */
export async function localAddressToward(url: string): Promise<string | null> {
  let host: string;
  let port: number;
  try {
    const parsed = new URL(url);
    host = parsed.hostname.replace(/^\[|\]$/g, '');
    port = Number(parsed.port) || (parsed.protocol === 'https:' ? 443 : 80);
  } catch {
    return null;
  }
  let address: string;
  try {
    address = isIP(host) ? host : (await lookup(host)).address;
  } catch {
    return null;
  }
  const socket = createSocket(isIP(address) === 6 ? 'udp6' : 'udp4');
  try {
    return await new Promise<string | null>((resolve) => {
      socket.once('error', () => resolve(null));
      socket.connect(port, address, () => {
        try {
          resolve(socket.address().address);
        } catch {
          resolve(null);
        }
      });
    });
  } finally {
    socket.close();
  }
}

export interface AdvertiseInput {
  /** Where engines bind (--engine-host). */
  engineHost: string;
  /** What the operator named (--advertise-host); absent = work it out. */
  advertiseHost?: string;
  /** The control plane URLs; the first one's route decides a wildcard's address. */
  controlUrls: readonly string[];
}

/**
 * The host put in engine endpoints and the management address: the
 * operator's choice, else a specific engine host as it is, else (a wildcard)
 * this machine's address toward the control plane. Null: a wildcard whose
 * route could not be found; endpoints then name loopback, which only a
 * control plane on this machine accepts.
 */
export async function advertisedHost(input: AdvertiseInput): Promise<string | null> {
  if (input.advertiseHost) return input.advertiseHost.replace(/^\[|\]$/g, '');
  if (!isWildcardHost(input.engineHost)) return input.engineHost;
  const first = input.controlUrls[0];
  return first ? localAddressToward(first) : null;
}
