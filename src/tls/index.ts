// TLS for llmgw's listeners and for the calls its parts make to each other:
// reading a certificate and key for a listener, and building an HTTP client
// that trusts one private CA. Separate from the control plane and the agent
// because both (and ctl) need the same few lines and must not import each
// other. Making certificates (`llmgw tls init`) lives in ./init.ts, loaded
// only by that command: it pulls in an X.509 library nothing else needs.
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { checkServerIdentity, type PeerCertificate } from 'node:tls';
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
export function readServerTls(
  certFile: string | undefined,
  keyFile: string | undefined,
  what: { cert: string; key: string },
): ServerTls | null {
  if (!certFile && !keyFile) return null;
  if (!certFile || !keyFile) {
    throw new LlmgwError(
      'LLMGW_CONFIG_INVALID',
      `${certFile ? what.cert : what.key} is set without ${certFile ? what.key : what.cert}; a listener needs both its certificate and its key`,
    );
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
    throw new LlmgwError(
      'LLMGW_CONFIG_INVALID',
      `${what} ${file} cannot be read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  }
  // Any "-----BEGIN ... PRIVATE KEY-----" (PKCS#8, EC, RSA) is a key; a certificate file may hold a chain.
  if (
    !bytes.toString('latin1').includes(label === 'CERTIFICATE' ? '-----BEGIN CERTIFICATE-----' : 'PRIVATE KEY-----')
  ) {
    throw new LlmgwError(
      'LLMGW_CONFIG_INVALID',
      `${what} ${file} holds no PEM ${label.toLowerCase()}; want the file \`llmgw tls init\` wrote, or one in PEM form`,
    );
  }
  return bytes;
}

/** Node's `checkServerIdentity`: undefined to accept the certificate, an Error to refuse it. */
export type ServerIdentityCheck = (host: string, cert: PeerCertificate) => Error | undefined;

/** Each certificate in a PEM bundle (a CA file may hold several). */
export function certificatesIn(pem: Buffer): X509Certificate[] {
  const blocks = pem.toString('latin1').match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  return blocks.map((block) => new X509Certificate(block));
}

/**
 * What an agent checks of a control plane beyond the CA's signature: the name
 * in its --control URL, and that the certificate was issued directly by a
 * certificate in --ca. `llmgw tls init` signs nodes' certificates with a node
 * CA under the root, so a node's key, which lives on a machine the control
 * plane does not control, cannot answer as the control plane even where its
 * certificate names the host. An operator whose own PKI issues the control
 * plane's certificate from an intermediate puts that intermediate in --ca.
 */
export function controlPlaneIdentity(ca: Buffer): ServerIdentityCheck {
  const issuers = certificatesIn(ca);
  return (host, cert) => {
    const named = checkServerIdentity(host, cert);
    if (named) return named;
    const leaf = new X509Certificate(cert.raw);
    if (issuers.some((issuer) => leaf.checkIssued(issuer) && leaf.verify(issuer.publicKey))) return undefined;
    return Object.assign(
      new Error(
        `the certificate at ${host} (${leaf.subject.replace(/\n/g, ', ')}) was issued by ${leaf.issuer.replace(/\n/g, ', ')}, not directly by a CA in --ca: it is not a control plane's`,
      ),
      { code: 'ERR_TLS_CERT_NOT_CONTROL_PLANE' },
    );
  };
}

/**
 * An HTTP client for the control plane, verified against `ca` alone with
 * controlPlaneIdentity. Null = null, as dispatcherForCa.
 */
export function controlPlaneConnect(
  ca: Buffer | null,
): { ca: Buffer; checkServerIdentity: ServerIdentityCheck } | null {
  return ca ? { ca, checkServerIdentity: controlPlaneIdentity(ca) } : null;
}

/**
 * What the control plane checks of a node's certificate: that it names the
 * node id, or else the host dialed. Node certificates from `llmgw tls init`
 * name the node id and never loopback, so a node is recognised by who it is
 * wherever it is reached (127.0.0.1 on a one-machine fleet included), and one
 * node's certificate does not pass for another's.
 */
export function nodeIdentity(nodeId: string): ServerIdentityCheck {
  return (host, cert) =>
    checkServerIdentity(nodeId, cert) === undefined ? undefined : checkServerIdentity(host, cert);
}

/**
 * What an agent checks of its own engines (--engine-tls): the certificate is
 * exactly the node's own (the agent handed it to them), or else names the
 * host dialed. The agent probes engines on loopback, which node certificates
 * never name.
 */
export function ownCertificateIdentity(certPem: Buffer): ServerIdentityCheck {
  const own = new Set(
    certificatesIn(certPem)
      .slice(0, 1)
      .map((c) => c.fingerprint256),
  );
  return (host, cert) => (own.has(cert.fingerprint256) ? undefined : checkServerIdentity(host, cert));
}

/**
 * The agent's client for its own engines: verified against `ca` (or the
 * system's CAs), accepting the node's own certificate `engineCert` wherever
 * the engine is reached. Null when there is nothing to set: undici's global
 * dispatcher then.
 */
export function engineDispatcher(ca: Buffer | null, engineCert: Buffer | null): Dispatcher | null {
  if (!ca && !engineCert) return null;
  return new Agent({
    connect: {
      ...(ca ? { ca } : {}),
      ...(engineCert ? { checkServerIdentity: ownCertificateIdentity(engineCert) } : {}),
    },
  });
}

/**
 * How one part calls another's HTTP API (the control plane calling an agent's
 * management API): https verified against a private CA, or plain http when
 * no CA is configured.
 */
export interface PeerClient {
  readonly scheme: 'http' | 'https';
  /** The client for calls to node `nodeId` (nodeIdentity); undefined: undici's global dispatcher (plain http; nothing to verify). */
  dispatcherFor(nodeId: string): Dispatcher | undefined;
}

/** The `dispatcher` option of a call to node `nodeId` through `peer`; {} for plain http or no peer client. */
export function agentDispatcher(peer: PeerClient | undefined, nodeId: string): { dispatcher?: Dispatcher } {
  const dispatcher = peer?.dispatcherFor(nodeId);
  return dispatcher ? { dispatcher } : {};
}

export const PLAIN_HTTP_PEER: PeerClient = Object.freeze({ scheme: 'http', dispatcherFor: () => undefined });

/** A peer client for CA bytes; null CA = plain http. One pool per node, made on first use and kept: a fleet has few. */
export function peerClient(ca: Buffer | null): PeerClient {
  if (!ca) return PLAIN_HTTP_PEER;
  const pools = new Map<string, Dispatcher>();
  return Object.freeze({
    scheme: 'https' as const,
    dispatcherFor(nodeId: string): Dispatcher {
      let pool = pools.get(nodeId);
      if (!pool) {
        pool = new Agent({ connect: { ca, checkServerIdentity: nodeIdentity(nodeId) } });
        pools.set(nodeId, pool);
      }
      return pool;
    },
  });
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
    case 'ERR_TLS_CERT_NOT_CONTROL_PLANE':
      return `the server's certificate is not a control plane's (${messageWithCode(err, code)}); a node certificate cannot serve the control plane. Give the control plane its control.pem (tls_cert), or put the CA that issued its certificate in ${caFlag}`;
    case 'ERR_TLS_CERT_ALTNAME_INVALID':
      return "the server's certificate does not name the host in the URL; use a name it lists, or make one that does (llmgw tls init --host / --name)";
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

/** The message of `err` or of its cause, whichever carries `code`. */
function messageWithCode(err: unknown, code: unknown): string {
  const holder = (err as { code?: unknown }).code === code ? err : (err as { cause?: unknown }).cause;
  return (holder as Error | undefined)?.message ?? String(code);
}
