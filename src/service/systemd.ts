// systemd units for a control plane and a node agent, rendered from a few
// choices, so an operator installs llmgw as a service without copying a
// unit from a web page and getting the two rules wrong that matter most:
// the agent's unit stops only the agent (KillMode=process), so restarting
// or upgrading it leaves the engines serving and the new agent adopts them;
// and tokens live in a root-readable environment file, never on a command
// line, where `ps` shows them to every user. Pure text in, text out; the
// writing is in install(), kept apart so the rendering is tested as is.
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { LlmgwError } from '../errors/index.js';

export type ServiceKind = 'control' | 'agent';
export const SERVICE_KINDS: readonly ServiceKind[] = ['control', 'agent'];

export interface ServiceOptions {
  readonly kind: ServiceKind;
  /** Absolute path of the node binary the unit runs. */
  readonly node: string;
  /** Absolute path of bin/llmgw.js. */
  readonly script: string;
  /** The system user the service runs as; it owns the state directory. */
  readonly user: string;
  /** Where the environment file lives (e.g. /etc/llmgw); the unit reads `<dir>/<kind>.env`. */
  readonly envDir: string;
  /** The state directory under /var/lib that systemd creates for the user (StateDirectory=): `llmgw` = /var/lib/llmgw. */
  readonly stateName: string;
  /**
   * Node flags the unit sets in NODE_OPTIONS (the control plane's young
   * generation), a default: a NODE_OPTIONS in the environment file replaces
   * it, as systemd reads EnvironmentFile= over Environment=. Absent = none.
   */
  readonly nodeOptions?: string;
}

/** Open files the services may hold: a control plane keeps a socket per agent long-poll and per client stream. */
export const SERVICE_NOFILE = 1_048_576;

export function unitName(kind: ServiceKind): string {
  return `llmgw-${kind}.service`;
}

export function envFileName(kind: ServiceKind): string {
  return `${kind}.env`;
}

/** Refuses what would make a unit systemd reads differently from what was meant: relative paths, spaces, newlines. */
function check(o: ServiceOptions): void {
  for (const [what, path] of [
    ['--node', o.node],
    ['the llmgw script', o.script],
    ['--env-dir', o.envDir],
  ] as const) {
    if (!path.startsWith('/'))
      throw new LlmgwError('LLMGW_CONFIG_INVALID', `${what}: want an absolute path; got "${path}"`);
    if (/[\s"'\\$%;]/.test(path))
      throw new LlmgwError(
        'LLMGW_CONFIG_INVALID',
        `${what}: "${path}" has a space, quote or special character systemd would read differently; use a path without them`,
      );
  }
  if (
    o.nodeOptions !== undefined &&
    !/^--[a-z0-9_-]+(=[A-Za-z0-9._-]+)?( --[a-z0-9_-]+(=[A-Za-z0-9._-]+)?)*$/.test(o.nodeOptions)
  )
    throw new LlmgwError(
      'LLMGW_CONFIG_INVALID',
      `NODE_OPTIONS for the unit: want node flags like --max-semi-space-size=64; got "${o.nodeOptions}"`,
    );
  if (!/^[a-z_][a-z0-9_-]{0,31}$/.test(o.user))
    throw new LlmgwError('LLMGW_CONFIG_INVALID', `--user: want a system user name like llmgw; got "${o.user}"`);
  if (!/^[a-z0-9][a-z0-9._-]{0,63}$/.test(o.stateName))
    throw new LlmgwError(
      'LLMGW_CONFIG_INVALID',
      `--state-name: want a directory name like llmgw; got "${o.stateName}"`,
    );
}

/** The unit file's text. */
export function renderUnit(o: ServiceOptions): string {
  check(o);
  const state = `/var/lib/${o.stateName}`;
  const env = join(o.envDir, envFileName(o.kind));
  const common = [
    `User=${o.user}`,
    `Group=${o.user}`,
    `EnvironmentFile=${env}`,
    `StateDirectory=${o.stateName}`,
    'StateDirectoryMode=0750',
    `WorkingDirectory=${state}`,
    'Restart=always',
    'RestartSec=2',
    `LimitNOFILE=${SERVICE_NOFILE}`,
    'NoNewPrivileges=yes',
  ];
  if (o.kind === 'control') {
    return [
      '[Unit]',
      'Description=llmgw control plane (client, admin and agent listeners)',
      'After=network-online.target',
      'Wants=network-online.target',
      '',
      '[Service]',
      'Type=simple',
      ...common,
      // Every key of the configuration may come from the environment file (LLMGW_ADMIN_TOKEN, LLMGW_JOIN_TOKEN, LLMGW_STORE, …).
      // Node's flags as a default in the environment rather than on ExecStart, where they would win over the file's.
      ...(o.nodeOptions ? [`Environment="NODE_OPTIONS=${o.nodeOptions}"`] : []),
      `ExecStart=${o.node} ${o.script} control`,
      // The control plane writes only its state directory (the SQLite store); engines never run under it.
      'ProtectSystem=strict',
      'ProtectHome=read-only',
      'PrivateTmp=yes',
      // A stop lets streams in flight finish within the router's drain, then ends.
      'TimeoutStopSec=60',
      '',
      '[Install]',
      'WantedBy=multi-user.target',
      '',
    ].join('\n');
  }
  return [
    '[Unit]',
    'Description=llmgw node agent (reports this machine, runs its engines)',
    'After=network-online.target',
    'Wants=network-online.target',
    '',
    '[Service]',
    'Type=simple',
    ...common,
    // No PrivateTmp or ProtectSystem here: engines outlive the agent's unit (below), and systemd would remove a
    // private /tmp they still use when the unit stops. GPU device files are world-usable as NVIDIA's driver makes
    // them; where a site restricts them to a group, add SupplementaryGroups= in a drop-in.
    // The control plane's URLs come from the environment file, as the join token does (LLMGW_JOIN_TOKEN).
    `ExecStart=${o.node} ${o.script} agent --control \${LLMGW_CONTROL} --state-dir ${state}/agent`,
    // Only the agent: its engines keep serving across a restart or an upgrade, and the next agent adopts them.
    // `systemctl stop` leaves them running too; drain the node first to stop them (docs/operations.md).
    'KillMode=process',
    // Engines pin memory for GPU transfers (NCCL, vLLM's pinned buffers).
    'LimitMEMLOCK=infinity',
    'TimeoutStopSec=30',
    '',
    '[Install]',
    'WantedBy=multi-user.target',
    '',
  ].join('\n');
}

/** The environment file's text: every secret the service needs, as placeholders to fill. */
export function renderEnvFile(kind: ServiceKind): string {
  if (kind === 'control') {
    return [
      '# llmgw control plane: secrets and settings, read by llmgw-control.service.',
      '# Root-readable only (0600): tokens never go on a command line, where ps shows them.',
      '# Any configuration key may be set here as LLMGW_<KEY>; see docs/operations.md.',
      '# Left empty, the admin token is made at first start in admin-token beside the store (0600) and kept.',
      'LLMGW_ADMIN_TOKEN=',
      'LLMGW_JOIN_TOKEN=',
      'LLMGW_CLIENT_ADDR=0.0.0.0:8080',
      'LLMGW_ADMIN_ADDR=127.0.0.1:8081',
      'LLMGW_AGENT_ADDR=0.0.0.0:8082',
      'LLMGW_STORE=sqlite:/var/lib/llmgw/llmgw.db',
      '#LLMGW_TLS_CERT=/etc/llmgw/tls/control.pem',
      '#LLMGW_TLS_KEY=/etc/llmgw/tls/control-key.pem',
      '# The unit runs node with a 64 MiB young generation (--max-semi-space-size=64, see the README);',
      "# a NODE_OPTIONS here replaces the unit's, so keep that flag in it unless you mean to change it.",
      '#NODE_OPTIONS=--max-semi-space-size=64',
      '',
    ].join('\n');
  }
  return [
    '# llmgw node agent: secrets and settings, read by llmgw-agent.service.',
    '# Root-readable only (0600): the join token never goes on a command line, where ps shows it.',
    '# The control plane agent URL(s), comma-separated for failover:',
    'LLMGW_CONTROL=https://control.example:8082',
    'LLMGW_JOIN_TOKEN=',
    '#LLMGW_CA=/etc/llmgw/tls/ca.pem',
    '',
  ].join('\n');
}

export interface Installed {
  readonly unitPath: string;
  readonly envPath: string;
  /** False when an environment file was there already: it holds secrets and is never overwritten. */
  readonly envWritten: boolean;
}

/**
 * Writes the unit (replacing an older one: it holds no secret) and, when
 * absent, the environment file with mode 0600. Runs no systemctl: what to
 * run next is the caller's to say.
 */
export function install(o: ServiceOptions, unitDir: string): Installed {
  const unitPath = join(unitDir, unitName(o.kind));
  const envPath = join(o.envDir, envFileName(o.kind));
  const unit = renderUnit(o);
  mkdirSync(unitDir, { recursive: true });
  writeFileSync(unitPath, unit, { mode: 0o644 });
  mkdirSync(o.envDir, { recursive: true, mode: 0o755 });
  const envWritten = !existsSync(envPath);
  if (envWritten) writeFileSync(envPath, renderEnvFile(o.kind), { mode: 0o600, flag: 'wx' });
  return { unitPath, envPath, envWritten };
}
