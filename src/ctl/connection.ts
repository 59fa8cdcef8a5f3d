// Where ctl finds the admin API and its token. Flags beat the environment,
// and when neither names a URL, ctl looks for a local `llmgw up` in its data
// directory (control.json and admin-token, which `llmgw control` writes too
// when it makes its own token), so the quick start needs no setup.
// A token read from that directory is only sent to the URL it was written
// beside: a token for this machine's control plane must not leak to another,
// nor to whatever another user left listening on the default port.
import { readFileSync } from 'node:fs';
import { hostname, userInfo } from 'node:os';
import { resolve } from 'node:path';

/** The files `llmgw up` keeps in its data directory (src/cli/up.ts UP_FILES). */
const CONTROL_FILE = 'control.json';
const TOKEN_FILE = 'admin-token';

/** `llmgw control`'s default admin address, tried when nothing else names one. */
export const DEFAULT_ADMIN_URL = 'http://127.0.0.1:8081';

export interface ConnectionFlags {
  adminUrl?: string;
  token?: string;
  dataDir?: string;
  actor?: string;
  /** PEM CA file to verify an https admin URL with. */
  ca?: string;
}

export interface Connection {
  adminUrl: string;
  /** Null = send no token (a loopback control plane may need none). */
  token: string | null;
  actor: string;
  /** Where the URL came from, for messages: "--admin-url", "LLMGW_ADMIN_URL", a control.json path, or "default". */
  source: string;
  /** The CA (from --ca or LLMGW_CA) an https admin API must chain to; null = the system's CAs. Unused for http. */
  ca: Buffer | null;
}

export class ConnectionConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConnectionConfigError';
  }
}

export function resolveConnection(flags: ConnectionFlags, env: NodeJS.ProcessEnv, cwd: string): Connection {
  const actor = flags.actor || env.LLMGW_ACTOR || defaultActor();
  const ca = readCaFile(
    flags.ca ? { file: flags.ca, from: '--ca' } : env.LLMGW_CA ? { file: env.LLMGW_CA, from: 'LLMGW_CA' } : null,
  );
  const explicitToken = flags.token || env.LLMGW_ADMIN_TOKEN || null;
  const explicitUrl = flags.adminUrl || env.LLMGW_ADMIN_URL;
  if (explicitUrl) {
    checkUrl(explicitUrl, flags.adminUrl ? '--admin-url' : 'LLMGW_ADMIN_URL');
    return {
      adminUrl: explicitUrl,
      token: explicitToken,
      actor,
      source: flags.adminUrl ? '--admin-url' : 'LLMGW_ADMIN_URL',
      ca,
    };
  }
  const dataDir = resolve(cwd, flags.dataDir || env.LLMGW_DATA_DIR || '.llmgw');
  const controlPath = resolve(dataDir, CONTROL_FILE);
  const local = readLocal(controlPath);
  if (!local) return { adminUrl: DEFAULT_ADMIN_URL, token: explicitToken, actor, source: 'default', ca };
  return {
    adminUrl: local,
    token: explicitToken ?? readToken(resolve(dataDir, TOKEN_FILE)),
    actor,
    source: controlPath,
    ca,
  };
}

function readLocal(path: string): string | null {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return null;
  }
  let parsed: { admin_url?: unknown };
  try {
    parsed = JSON.parse(text) as { admin_url?: unknown };
  } catch {
    throw new ConnectionConfigError(`${path} is not JSON; remove it or start \`llmgw up\` again to rewrite it`);
  }
  if (typeof parsed.admin_url !== 'string')
    throw new ConnectionConfigError(`${path} has no admin_url; start \`llmgw up\` again to rewrite it`);
  checkUrl(parsed.admin_url, path);
  return parsed.admin_url;
}

function readCaFile(given: { file: string; from: string } | null): Buffer | null {
  if (!given) return null;
  let bytes: Buffer;
  try {
    bytes = readFileSync(given.file);
  } catch (err) {
    throw new ConnectionConfigError(
      `${given.from}: cannot read ${given.file} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}); want the ca.pem \`llmgw tls init\` wrote`,
    );
  }
  if (!bytes.toString('latin1').includes('-----BEGIN CERTIFICATE-----')) {
    throw new ConnectionConfigError(
      `${given.from}: ${given.file} holds no PEM certificate; want the ca.pem \`llmgw tls init\` wrote`,
    );
  }
  return bytes;
}

function readToken(path: string): string | null {
  try {
    return readFileSync(path, 'utf8').trim() || null;
  } catch {
    return null;
  }
}

function checkUrl(url: string, from: string): void {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ConnectionConfigError(`${from}: "${url}" is not a URL; want e.g. http://127.0.0.1:8081`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new ConnectionConfigError(`${from}: "${url}" is not an http(s) URL; want e.g. http://127.0.0.1:8081`);
  }
}

/** user@host: who did it, for the audit log. */
export function defaultActor(): string {
  let user = 'unknown';
  try {
    user = userInfo().username;
  } catch {
    // No passwd entry (a container with an arbitrary uid): the host still says where.
  }
  return `${user}@${hostname()}`;
}
