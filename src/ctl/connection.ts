// Where ctl finds the admin API and its token. Flags beat the environment,
// and when neither names a URL, ctl looks for a local `llmgw up` in its data
// directory (control.json and admin-token, which `llmgw control` writes too
// when it makes its own token), so the quick start needs no setup.
// A token read from that directory is only sent to the URL it was written
// beside: a token for this machine's control plane must not leak to another,
// nor to whatever another user left listening on the default port.
// From any other directory, ctl finds a running `llmgw up` through the small
// pointer file it leaves in the user's state dir (upPointerPath).
import { readFileSync } from 'node:fs';
import { hostname, userInfo } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';

/** The files `llmgw up` keeps in its data directory (src/cli/up.ts UP_FILES). */
const CONTROL_FILE = 'control.json';
const TOKEN_FILE = 'admin-token';

/** The pointer's name in the user's state dir; see upPointerPath. */
export const UP_POINTER_FILE = 'up.json';

/** What a running `llmgw up` writes to upPointerPath() (and removes on a clean exit). */
export interface UpPointer {
  /** The `llmgw up` process: a pointer whose process is gone is stale and ignored. */
  pid: number;
  /** Its data dir, where control.json and admin-token are. */
  data_dir: string;
  admin_url: string;
}

/**
 * Where a running `llmgw up` says where it is: $XDG_STATE_HOME/llmgw/up.json,
 * else ~/.local/state/llmgw/up.json (the XDG default). From `env` rather than
 * the process so that tests choose it; null when env names neither (no HOME).
 */
export function upPointerPath(env: NodeJS.ProcessEnv): string | null {
  const xdg = env.XDG_STATE_HOME;
  // The XDG spec says a relative path is invalid and to be ignored.
  if (xdg && isAbsolute(xdg)) return join(xdg, 'llmgw', UP_POINTER_FILE);
  if (env.HOME) return join(env.HOME, '.local', 'state', 'llmgw', UP_POINTER_FILE);
  return null;
}

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
  /**
   * Where ctl looked for a local `llmgw up` and found none, each with why
   * ("…/.llmgw/control.json: none"), for the message when the default URL
   * does not answer. Empty when a flag, the environment or a file named the URL.
   */
  looked: readonly string[];
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
      looked: [],
    };
  }
  const named = flags.dataDir || env.LLMGW_DATA_DIR;
  const fromDir = (dir: string): Connection | null => {
    const controlPath = resolve(dir, CONTROL_FILE);
    const local = readLocal(controlPath);
    if (!local) return null;
    const token = explicitToken ?? readToken(resolve(dir, TOKEN_FILE));
    return { adminUrl: local, token, actor, source: controlPath, ca, looked: [] };
  };
  const dataDir = resolve(cwd, named || '.llmgw');
  const here = fromDir(dataDir);
  if (here) return here;
  const looked = [`${resolve(dataDir, CONTROL_FILE)}: none`];
  // A data dir named by flag or environment is the only one ctl may use; only the default also tries the pointer.
  if (!named) {
    const pointerPath = upPointerPath(env);
    const pointer = pointerPath === null ? 'neither XDG_STATE_HOME nor HOME is set' : readPointer(pointerPath);
    if (typeof pointer !== 'string') {
      const there = fromDir(resolve(pointer.data_dir));
      if (there) return there;
      looked.push(`${resolve(pointer.data_dir, CONTROL_FILE)} (named by ${pointerPath}): none`);
    } else looked.push(`${pointerPath ?? "the user's state dir"}: ${pointer}`);
  }
  return { adminUrl: DEFAULT_ADMIN_URL, token: explicitToken, actor, source: 'default', ca, looked };
}

/** The pointer a running `llmgw up` left, or why there is none to use. */
function readPointer(path: string): UpPointer | string {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return 'none';
  }
  let parsed: Partial<UpPointer>;
  try {
    parsed = JSON.parse(text) as Partial<UpPointer>;
  } catch {
    return 'not JSON (remove it)';
  }
  if (typeof parsed.data_dir !== 'string' || typeof parsed.pid !== 'number') return 'no data_dir or pid (remove it)';
  // A kill -9 or a crash leaves the file behind; its process being gone is what makes it stale.
  if (!processAlive(parsed.pid)) return `names \`llmgw up\` pid ${parsed.pid}, which is not running`;
  return parsed as UpPointer;
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it runs, as another user.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
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
