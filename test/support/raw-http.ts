// One HTTP/1.1 exchange written byte for byte on a socket, for the tests that
// replay what no HTTP client would send (two Host headers, absolute-form
// targets, a body that stops): the answer is read until the server closes,
// and a close with nothing written reads as status 0.
import { connect as connectTcp } from 'node:net';
import { connect as connectTls } from 'node:tls';

export interface RawAnswer {
  /** The status line's code; 0 = the server closed without answering. */
  status: number;
  head: string;
  body: string;
}

/**
 * Sends `request` exactly as given to `url`'s host and port and resolves
 * with what came back once the server closes. `ca` given: over TLS,
 * trusting that CA, the request written once the handshake is done.
 */
export function rawExchange(
  url: string,
  request: string,
  options: { timeoutMs?: number; ca?: Buffer } = {},
): Promise<RawAnswer> {
  const { hostname, port } = new URL(url);
  const timeoutMs = options.timeoutMs ?? 20_000;
  return new Promise((resolve, reject) => {
    const socket = options.ca
      ? connectTls({ host: hostname, port: Number(port), ca: options.ca }, () => socket.write(request))
      : connectTcp({ host: hostname, port: Number(port) }, () => socket.write(request));
    let data = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no end of the answer within ${timeoutMs} ms; so far: ${data.slice(0, 200)}`));
    }, timeoutMs);
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (data += chunk));
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      const split = data.indexOf('\r\n\r\n');
      const head = split < 0 ? data : data.slice(0, split);
      const m = /^HTTP\/1\.1 (\d{3})/.exec(head);
      resolve({ status: m ? Number(m[1]) : 0, head, body: split < 0 ? '' : data.slice(split + 4) });
    });
  });
}
