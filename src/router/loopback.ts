// Running the client listener without keys is safe only where nobody else
// can reach it; this is the check the control plane applies to its address.
import { isIP } from 'node:net';

/** True for 127.0.0.0/8, ::1, ::ffff:127.x and "localhost"; false for anything else, 0.0.0.0 and :: included. */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (h === 'localhost') return true;
  if (isIP(h) === 4) return h.startsWith('127.');
  if (isIP(h) === 6) return h === '::1' || h.startsWith('::ffff:127.');
  return false;
}
