// What counts as this machine's own address. The control plane refuses to
// run a listener without a token off loopback, and the agent warns before
// sending a secret over plain http off loopback; both must agree on what
// loopback is, so the answer lives here, in a leaf every part may import.
import { isIP } from 'node:net';

/** True for the addresses that mean "every interface" when bound to: 0.0.0.0 and :: (brackets allowed). */
export function isWildcardHost(host: string): boolean {
  return host === '0.0.0.0' || host === '::' || host === '[::]';
}

/** True for 127.0.0.0/8, ::1, ::ffff:127.x and "localhost" (brackets allowed); false for anything else, 0.0.0.0 and :: included. */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (h === 'localhost') return true;
  if (isIP(h) === 4) return h.startsWith('127.');
  if (isIP(h) === 6) return h === '::1' || h.startsWith('::ffff:127.');
  return false;
}
