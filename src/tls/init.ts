// `llmgw tls init`: a private CA and the certificates llmgw's parts present,
// so a fleet can run TLS without a PKI of its own. Certificates are built by
// @peculiar/x509 over WebCrypto (ECDSA P-256, SHA-256), never by hand-written
// ASN.1. Kept apart from ./index.ts so that only this command loads the X.509
// library and the reflect-metadata shim it needs.
//
// Nodes get their certificates from a node CA under the root, not from the
// root itself, and never for loopback names: a node's key is on a machine
// the control plane does not control, and must not be able to answer as the
// control plane (agents accept only a certificate the root issued directly,
// see controlPlaneIdentity in ./index.ts) nor as whatever listens on
// loopback. The control plane checks a node's certificate by its node id.
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import {
  chmodSync,
  closeSync,
  existsSync,
  fsyncSync,
  mkdirSync,
  openSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { isIP } from 'node:net';
import { basename, dirname, join, resolve } from 'node:path';
import { randomBytes, webcrypto } from 'node:crypto';
import { LlmgwError } from '../errors/index.js';
import { isLoopbackHost } from '../net/index.js';

/** A node's certificate: its name (the agent's node id) and any more names or addresses the control plane dials it by. */
export interface NodeCertRequest {
  name: string;
  /** DNS names or IP addresses beside the name, never loopback; empty = the name only. */
  hosts: readonly string[];
}

export interface TlsInitOptions {
  dir: string;
  /** DNS names or IP addresses clients and agents use for the control plane; localhost, 127.0.0.1 and ::1 are always added. */
  controlHosts: readonly string[];
  nodes: readonly NodeCertRequest[];
  /** How long the control plane's and nodes' certificates are valid, in days. The CA lives ten years, or `days` if longer. */
  days: number;
  /** True: replace files that exist (a new CA: every certificate it signed before stops being trusted). */
  force: boolean;
  /** Injected so tests control validity; absent = now. */
  now?: Date;
}

export interface TlsInitResult {
  /** Every file written, in the order a reader needs them (the CA first). */
  files: { path: string; what: string }[];
  /** Sentences for the operator, e.g. the directory is readable by others. */
  warnings: string[];
}

/** Node names become file names and certificate names: the agent's own node id rule. */
const NODE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
const HOST = /^[A-Za-z0-9*]([A-Za-z0-9.-]{0,252})?$/;
const LOOPBACK = ['localhost', '127.0.0.1', '::1'];
const ALG = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };
const DAY_MS = 86_400_000;

/** Parses `--name gpu-7` or `--name gpu-7=10.0.0.7,gpu-7.example` into a request. */
export function parseNodeArg(text: string): NodeCertRequest {
  const [name = '', rest] = text.split('=', 2);
  const hosts = (rest ?? '')
    .split(',')
    .map((h) => h.trim())
    .filter(Boolean);
  return { name: name.trim(), hosts };
}

export async function initTls(options: TlsInitOptions): Promise<TlsInitResult> {
  const problems = checkOptions(options);
  if (problems.length) throw new LlmgwError('LLMGW_CONFIG_INVALID', `llmgw tls init: ${problems.join('; ')}`);
  const dir = resolve(options.dir);
  const plan: { file: string; what: string }[] = [
    { file: 'ca.pem', what: 'CA certificate: give it to agents (--ca), ctl (--ca) and the control plane (agent_ca)' },
    { file: 'ca-key.pem', what: 'CA private key: keep it offline; it signs every certificate here' },
    { file: 'control.pem', what: 'control plane certificate (tls_cert)' },
    { file: 'control-key.pem', what: 'control plane private key (tls_key)' },
    {
      file: 'node-ca.pem',
      what: 'node CA certificate, signed by the CA: it signs the node certificates (each node-NAME.pem carries it)',
    },
    { file: 'node-ca-key.pem', what: 'node CA private key: keep it offline with ca-key.pem' },
    ...options.nodes.flatMap((n) => [
      { file: `node-${n.name}.pem`, what: `node ${n.name} certificate and the node CA's (agent --tls-cert)` },
      { file: `node-${n.name}-key.pem`, what: `node ${n.name} private key (agent --tls-key)` },
    ]),
  ];
  // Checked before anything is made, so a refusal leaves the directory as it was.
  const existing = plan.filter((p) => existsSync(join(dir, p.file))).map((p) => p.file);
  if (existing.length && !options.force) {
    throw new LlmgwError(
      'LLMGW_TLS_FILE_EXISTS',
      `${dir} already holds ${existing.join(', ')}; pass --force to replace them (a new CA: certificates it signed before stop being trusted), or choose another directory`,
    );
  }

  const warnings: string[] = [];
  if (existsSync(dir)) {
    const mode = statSync(dir).mode & 0o777;
    // The operator's own directory: not ours to change, but the keys in it are only as private as it is.
    if (mode & 0o077)
      warnings.push(
        `${dir} is mode ${mode.toString(8)}; others on this machine can list it. chmod 700 it, or keep the keys elsewhere`,
      );
  } else {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    chmodSync(dir, 0o700);
  }

  x509.cryptoProvider.set(webcrypto as unknown as Crypto);
  const now = options.now ?? new Date();
  const notBefore = new Date(now.getTime() - 5 * 60_000); // a little back: clocks in a fleet are never quite in step
  const leafNotAfter = new Date(now.getTime() + options.days * DAY_MS);
  const caNotAfter = new Date(now.getTime() + Math.max(options.days, 3650) * DAY_MS);

  const caKeys = await newKeys();
  const caName = `CN=llmgw private CA (${basename(dir)}), O=llmgw`;
  const ca = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: caName,
    keys: caKeys,
    notBefore,
    notAfter: caNotAfter,
    signingAlgorithm: ALG,
    extensions: [
      // Path length 1: the root signs the control plane's certificate and the node CA, which signs only nodes'.
      new x509.BasicConstraintsExtension(true, 1, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(caKeys.publicKey),
    ],
  });

  // The node CA may sign only end certificates (path length 0), and only for the uses a node has.
  const nodeCaKeys = await newKeys();
  const nodeCa = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: `CN=llmgw node CA (${basename(dir)}), O=llmgw`,
    issuer: ca.subject,
    publicKey: nodeCaKeys.publicKey,
    signingKey: caKeys.privateKey,
    notBefore,
    notAfter: caNotAfter,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth]),
      await x509.SubjectKeyIdentifierExtension.create(nodeCaKeys.publicKey),
      await x509.AuthorityKeyIdentifierExtension.create(caKeys.publicKey),
    ],
  });

  const leaf = async (
    commonName: string,
    hosts: readonly string[],
    issuer: { cert: x509.X509Certificate; keys: CryptoKeyPair },
    usages: x509.ExtendedKeyUsage[],
  ) => {
    const keys = await newKeys();
    const cert = await x509.X509CertificateGenerator.create({
      serialNumber: serial(),
      subject: `CN=${commonName}, O=llmgw`,
      issuer: issuer.cert.subject,
      publicKey: keys.publicKey,
      signingKey: issuer.keys.privateKey,
      notBefore,
      notAfter: leafNotAfter,
      signingAlgorithm: ALG,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension(usages),
        new x509.SubjectAlternativeNameExtension(
          unique(hosts).map((h) => ({ type: isIP(h) ? ('ip' as const) : ('dns' as const), value: h })),
        ),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
        await x509.AuthorityKeyIdentifierExtension.create(issuer.keys.publicKey),
      ],
    });
    return { cert: cert.toString('pem'), key: await privatePem(keys.privateKey) };
  };

  const contents = new Map<string, string>([
    ['ca.pem', ca.toString('pem')],
    ['ca-key.pem', await privatePem(caKeys.privateKey)],
    ['node-ca.pem', nodeCa.toString('pem')],
    ['node-ca-key.pem', await privatePem(nodeCaKeys.privateKey)],
  ]);
  // The control plane's certificate is the only one the root signs itself: that is what agents check.
  const control = await leaf('llmgw control', [...options.controlHosts, ...LOOPBACK], { cert: ca, keys: caKeys }, [
    x509.ExtendedKeyUsage.serverAuth,
  ]);
  contents.set('control.pem', control.cert).set('control-key.pem', control.key);
  for (const node of options.nodes) {
    // Server auth: a node certificate is what the agent's management API (and, with --engine-tls, its engines) serve.
    // Client auth: the same certificate can later prove a node to the control plane (mutual TLS).
    const usages = [x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth];
    const made = await leaf(node.name, [node.name, ...node.hosts], { cert: nodeCa, keys: nodeCaKeys }, usages);
    // The node CA's certificate follows the node's, so a peer that trusts only ca.pem can build the chain.
    contents
      .set(`node-${node.name}.pem`, `${made.cert.trimEnd()}\n${nodeCa.toString('pem').trimEnd()}\n`)
      .set(`node-${node.name}-key.pem`, made.key);
  }

  const files: TlsInitResult['files'] = [];
  for (const { file, what } of plan) {
    const path = join(dir, file);
    const mode = file.endsWith('-key.pem') ? 0o600 : 0o644;
    if (options.force) {
      replaceFile(path, contents.get(file)!, mode);
    } else {
      // 'wx': a file that appeared since the check above is still not overwritten. A new
      // file is created with `mode` less the umask, never looser; chmod restores what the umask took.
      writeFileSync(path, contents.get(file)!, { mode, flag: 'wx' });
      chmodSync(path, mode);
    }
    files.push({ path, what });
  }
  return { files, warnings };
}

/**
 * Puts `text` at `path` through a new file in the same directory, created
 * with `mode` (0600 for a key) and renamed over the old one. Writing into
 * the existing file would put a new private key, for a moment, under the
 * old file's mode (0644 if someone loosened it), and into every hard link
 * to it for good; a rename leaves the old inode, and its links, with the
 * old contents. On failure the temporary file is removed and the old one
 * is untouched.
 */
function replaceFile(path: string, text: string, mode: number): void {
  const temp = join(dirname(path), `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    const fd = openSync(temp, 'wx', mode);
    try {
      writeFileSync(fd, text);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    chmodSync(temp, mode); // the umask may have taken bits a certificate (0644) should have
    renameSync(temp, path);
  } catch (err) {
    rmSync(temp, { force: true });
    throw err;
  }
}

function checkOptions(o: TlsInitOptions): string[] {
  const problems: string[] = [];
  if (!Number.isInteger(o.days) || o.days < 1 || o.days > 36_500)
    problems.push(`--days: want a whole number of days from 1 to 36500; got ${o.days}`);
  for (const host of o.controlHosts) {
    if (!isIP(host) && !HOST.test(host)) problems.push(`--host: "${host}" is neither a DNS name nor an IP address`);
  }
  const seen = new Set<string>();
  for (const node of o.nodes) {
    if (!NODE_NAME.test(node.name))
      problems.push(`--name: "${node.name}" is not a node id; want 1-128 letters, digits, ".", "_" or "-", like gpu-7`);
    if (seen.has(node.name)) problems.push(`--name: ${node.name} is given twice`);
    seen.add(node.name);
    for (const host of node.hosts) {
      if (!isIP(host) && !HOST.test(host))
        problems.push(`--name ${node.name}: "${host}" is neither a DNS name nor an IP address`);
    }
    for (const name of [node.name, ...node.hosts].filter(isLoopbackHost)) {
      problems.push(
        `--name ${node.name}: "${name}" is a loopback name; a node certificate never names loopback, so that a node's key cannot answer as this machine (the control plane checks a node's certificate by its node id, wherever it dials it)`,
      );
    }
  }
  return problems;
}

async function newKeys(): Promise<CryptoKeyPair> {
  return (await webcrypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, [
    'sign',
    'verify',
  ])) as CryptoKeyPair;
}

async function privatePem(key: CryptoKey): Promise<string> {
  const der = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', key as webcrypto.CryptoKey));
  const lines = der.toString('base64').match(/.{1,64}/g) ?? [];
  return `-----BEGIN PRIVATE KEY-----\n${lines.join('\n')}\n-----END PRIVATE KEY-----\n`;
}

/** 16 random bytes with the top bit clear: a positive serial, unique in practice, as RFC 5280 asks. */
function serial(): string {
  const bytes = webcrypto.getRandomValues(new Uint8Array(16));
  bytes[0] = bytes[0]! & 0x7f;
  return Buffer.from(bytes).toString('hex');
}

function unique(values: readonly string[]): string[] {
  return [...new Set(values.map((v) => v.toLowerCase()))];
}
