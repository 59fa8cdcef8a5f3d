// TLS for llmgw's listeners and for the calls its parts make to each other:
// reading a certificate and key for a listener, and building an HTTP client
// that trusts one private CA. Separate from the control plane and the agent
// because both (and ctl) need the same few lines and must not import each
// other. Making certificates (`llmgw tls init`) lives in ./init.ts, loaded
// only by that command: it pulls in an X.509 library nothing else needs.
import { readFileSync } from 'node:fs';
import { Agent, type Dispatcher } from 'undici';
import { LlmgwError } from '../errors/index.js';
import { isLoopbackHost } from '../net/index.js';

/** A listener's certificate chain and private key, as Node's `https.createServer` takes them. */
export interface ServerTls {
  readonly cert: Buffer;
  readonly key: Buffer;
}

/**
 * Reads a PEM certificate and key for a listener. `what` names where the
 * paths came from (`tls_cert`, `--tls-cert`) so a wrong path is fixed in the
 * right place. Both or neither must be given; neither = plain HTTP (null).
 */
export function readServerTls(certFile: string | undefined, keyFile: string | undefined, what: { cert: string; key: string }): ServerTls | null {
  if (!certFile && !keyFile) return null;
  if (!certFile || !keyFile) {
    throw new LlmgwError('LLMGW_CONFIG_INVALID', `${certFile ? what.cert : what.key} is set without ${certFile ? what.key : what.cert}; a listener needs both its certificate and its key`);
  }
  const cert = readPem(certFile, what.cert, 'CERTIFICATE');
  const key = readPem(keyFile, what.key, 'PRIVATE KEY');
  return { cert, key };
}

/** The PEM CA certificate(s) in `file`, to trust instead of the system's CAs. */
export function readCa(file: string, what: string): Buffer {
  return readPem(file, what, 'CERTIFICATE');
}

/**
 * An HTTP client that verifies servers against `ca` (and only it: a
 * certificate from a public CA is refused, so a stolen DNS name is not
 * enough). Null = null: the caller keeps undici's global dispatcher, which
 * trusts the system's CAs.
 */
export function dispatcherForCa(ca: Buffer | null): Dispatcher | null {
  return ca ? new Agent({ connect: { ca } }) : null;
}

/** True when `url` is http:// to a host other than this machine: whatever it carries crosses the network in clear. */
export function isPlainHttpOffLoopback(url: string): boolean {
  const parsed = new URL(url);
  if (parsed.protocol !== 'http:') return false;
  return !isLoopbackHost(parsed.hostname);
}

function readPem(file: string, what: string, label: 'CERTIFICATE' | 'PRIVATE KEY'): Buffer {
  let bytes: Buffer;
  try {
    bytes = readFileSync(file);
  } catch (err) {
    throw new LlmgwError('LLMGW_CONFIG_INVALID', `${what} ${file} cannot be read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  // Any "-----BEGIN ... PRIVATE KEY-----" (PKCS#8, EC, RSA) is a key; a certificate file may hold a chain.
  if (!bytes.toString('latin1').includes(label === 'CERTIFICATE' ? '-----BEGIN CERTIFICATE-----' : 'PRIVATE KEY-----')) {
    throw new LlmgwError('LLMGW_CONFIG_INVALID', `${what} ${file} holds no PEM ${label.toLowerCase()}; want the file \`llmgw tls init\` wrote, or one in PEM form`);
  }
  return bytes;
}

/**
 * How one part calls another's HTTP API (the control plane calling an agent's
 * management API): https verified against a private CA, or plain http when
 * no CA is configured.
 */
export interface PeerClient {
  readonly scheme: 'http' | 'https';
  /** Undefined: undici's global dispatcher (plain http; nothing to verify). */
  readonly dispatcher: Dispatcher | undefined;
}

export const PLAIN_HTTP_PEER: PeerClient = Object.freeze({ scheme: 'http', dispatcher: undefined });

/** A peer client for CA bytes; null CA = plain http. */
export function peerClient(ca: Buffer | null): PeerClient {
  return ca ? Object.freeze({ scheme: 'https', dispatcher: dispatcherForCa(ca)! }) : PLAIN_HTTP_PEER;
}

/**
 * What to do about a failed connection when TLS verification is what failed,
 * or null for any other failure. `caFlag` names where the trusted CA is set
 * (`--ca`, `agent_ca`), so the sentence points at the right place.
 */
export function certificateProblem(err: unknown, caFlag: string): string | null {
  const code = (err as { code?: unknown }).code ?? (err as { cause?: { code?: unknown } }).cause?.code;
  switch (code) {
    case 'UNABLE_TO_VERIFY_LEAF_SIGNATURE':
    case 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY':
    case 'SELF_SIGNED_CERT_IN_CHAIN':
    case 'DEPTH_ZERO_SELF_SIGNED_CERT':
    case 'CERT_SIGNATURE_FAILURE':
      return `the server's certificate is not signed by a CA this process trusts (${code}); give ${caFlag} the ca.pem that signed it`;
    case 'ERR_TLS_CERT_ALTNAME_INVALID':
      return 'the server\'s certificate does not name the host in the URL; use a name it lists, or make one that does (llmgw tls init --host / --name)';
    case 'CERT_HAS_EXPIRED':
    case 'CERT_NOT_YET_VALID':
      return `the server's certificate is not valid now (${code}); make a new one, or check this machine's clock`;
    case 'ERR_SSL_WRONG_VERSION_NUMBER':
    case 'ERR_SSL_PACKET_LENGTH_TOO_LONG':
      return 'the server does not speak TLS on that port; give it a certificate (tls_cert, or --tls-cert for an agent), or call it over http://';
    default:
      return null;
  }
}
