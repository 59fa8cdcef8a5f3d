// `llmgw control`: load the configuration from file, environment and flags,
// start the control plane, and stop it cleanly on SIGINT or SIGTERM.
//
// With no admin token configured, the admin listener would answer every admin
// call on loopback to anyone on the machine, so `llmgw control` makes a token
// (0600, in its data directory: beside the SQLite store, else ./.llmgw) and
// uses it, unless told outright to run without one
// (--insecure-no-admin-token). The file is kept and read again next start.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { ControlPlane, CONTROL_OPTION_KEYS, loadControlConfig } from '../control/index.js';
import type { ControlConfig } from '../control/config/index.js';
import { LlmgwError } from '../errors/index.js';
import { applyHeapGrowing, restartWithYoungGeneration } from './heap.js';
import { UP_FILES } from './up.js';
import { ADMIN_TOKEN_FLAG, JOIN_TOKEN_FLAG, tokenFlagWarning } from './token-flags.js';

export async function runControl(opts: Record<string, string | boolean | undefined>): Promise<void> {
  restartWithYoungGeneration();
  const flags: Record<string, string> = {};
  for (const key of CONTROL_OPTION_KEYS) {
    const camel = key.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase());
    const value = opts[camel];
    if (value !== undefined) flags[key] = String(value);
  }
  for (const t of [ADMIN_TOKEN_FLAG, JOIN_TOKEN_FLAG]) {
    if (flags[t.flag.slice(2).replaceAll('-', '_')] !== undefined)
      process.stderr.write(`${tokenFlagWarning('llmgw control', t)}\n`);
  }
  const sources = { ...(typeof opts.config === 'string' ? { file: opts.config } : {}), env: process.env };
  let config = loadControlConfig({ ...sources, flags });
  /** The directory of an admin token made here; null = the operator gave one (or none is wanted). */
  let madeIn: string | null = null;
  if (config.adminToken === null && !config.insecureNoAdminToken) {
    madeIn = dataDirOf(config);
    const made = madeAdminToken(madeIn);
    config = loadControlConfig({ ...sources, flags: { ...flags, admin_token_file: made.path } });
    process.stderr.write(
      `llmgw control: no admin token was configured, so admin requests need the one ${made.created ? 'made now' : 'made on an earlier start'} in ${made.path}` +
        ` (owner-only; llmgw ctl reads it from there, or: LLMGW_ADMIN_TOKEN=$(cat ${made.path}) llmgw ctl …). To run without one, start with --insecure-no-admin-token.\n`,
    );
  }
  applyHeapGrowing(config.heapGrowingPercent);
  const plane = await ControlPlane.create(config, { allowHttpSources: opts.allowHttpSources !== undefined });
  const urls = await plane.listen();
  // The listening line is printed whatever the log level: scripts and tests wait for it.
  plane.logger
    .child({}, { level: 'info' })
    .info(
      { client: urls.client, admin: urls.admin, agent: urls.agent, store: config.store.kind },
      'llmgw control listening',
    );
  // Beside the token it made, the URL it is for, as `llmgw up` writes: ctl sends a token from this
  // directory only to the URL written with it, never to whatever listens on the default port.
  if (madeIn !== null)
    writeFileSync(join(madeIn, UP_FILES.control), `${JSON.stringify({ admin_url: urls.admin }, null, 2)}\n`, {
      mode: 0o600,
    });
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    plane.logger.info({ signal }, 'stopping');
    void plane.close().then(() => process.exit(0));
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

/** Where the control plane keeps what it makes: the SQLite store's directory, else .llmgw in the working directory. */
export function dataDirOf(config: Pick<ControlConfig, 'store'>): string {
  return config.store.kind === 'sqlite' ? dirname(resolve(config.store.path)) : resolve('.llmgw');
}

/**
 * The admin token in `<dir>/admin-token`, made (32 random bytes, 0600) when
 * the file is absent. A file that is there but too short to be a token is a
 * mistake to fix, not one to overwrite.
 */
export function madeAdminToken(dir: string): { path: string; created: boolean } {
  // The name `llmgw up` gives its token: ctl reads either from the same place.
  const path = join(dir, UP_FILES.adminToken);
  if (existsSync(path)) {
    if (readFileSync(path, 'utf8').trim().length < 16) {
      throw new LlmgwError(
        'LLMGW_CONFIG_INVALID',
        `${path} holds fewer than 16 characters, so it is no admin token; remove it to have a new one made, or set admin_token_file`,
      );
    }
    return { path, created: false };
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  // wx: two control planes starting at once on one directory must not each write their own.
  try {
    writeFileSync(path, `${randomBytes(32).toString('base64url')}\n`, { mode: 0o600, flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    return { path, created: false };
  }
  return { path, created: true };
}
