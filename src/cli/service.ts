// `llmgw install-service control|agent`: writes the systemd unit and an
// environment file for the secrets (src/service/systemd.ts renders them),
// then says what to run next. It runs no systemctl and creates no user: an
// operator sees and runs those steps, which differ between distributions.
import { fileURLToPath } from 'node:url';
import { resolve } from 'node:path';
import { LlmgwError } from '../errors/index.js';
import { CLI_DEFAULTS } from './defaults.js';
import { YOUNG_GENERATION_MIB } from './heap.js';
import {
  install,
  renderUnit,
  SERVICE_KINDS,
  type ServiceKind,
  type ServiceOptions,
  unitName,
} from '../service/systemd.js';

/** `llmgw install-service`'s flags; absent = CLI_DEFAULTS.installService, and node = this one. */
export interface InstallServiceFlags {
  print?: boolean;
  unitDir?: string;
  envDir?: string;
  user?: string;
  stateName?: string;
  node?: string;
}

/** bin/llmgw.js of this installation: dist/cli/ is two levels below the package root. */
const SCRIPT = fileURLToPath(new URL('../../bin/llmgw.js', import.meta.url));

export function runInstallService(
  kind: string,
  flags: InstallServiceFlags,
  out: (line: string) => void = (l) => process.stdout.write(`${l}\n`),
): void {
  if (!SERVICE_KINDS.includes(kind as ServiceKind)) {
    throw new LlmgwError(
      'LLMGW_CONFIG_INVALID',
      `want one of ${SERVICE_KINDS.join(', ')}: llmgw install-service control (the control plane) or agent (a GPU node); got "${kind}"`,
    );
  }
  const options: ServiceOptions = {
    kind: kind as ServiceKind,
    node: resolve(flags.node ?? process.execPath),
    script: SCRIPT,
    user: flags.user ?? CLI_DEFAULTS.installService.user,
    envDir: resolve(flags.envDir ?? CLI_DEFAULTS.installService.envDir),
    stateName: flags.stateName ?? CLI_DEFAULTS.installService.stateName,
    // The control plane serves the requests: the young generation they need, as `npm start` gives it.
    ...(kind === 'control' ? { nodeOptions: `--max-semi-space-size=${YOUNG_GENERATION_MIB}` } : {}),
  };
  if (flags.print) {
    out(renderUnit(options).trimEnd());
    return;
  }
  const done = install(options, resolve(flags.unitDir ?? CLI_DEFAULTS.installService.unitDir));
  const unit = unitName(options.kind);
  out(`wrote ${done.unitPath}`);
  out(
    done.envWritten
      ? `wrote ${done.envPath} (0600): fill in its tokens before starting`
      : `kept ${done.envPath}: it exists and holds secrets, so it is never overwritten`,
  );
  out('');
  out('next:');
  out(
    `  useradd --system --home-dir /var/lib/${options.stateName} --shell /usr/sbin/nologin ${options.user}   # once, if the user does not exist`,
  );
  out(`  $EDITOR ${done.envPath}`);
  out(`  systemctl daemon-reload && systemctl enable --now ${unit}`);
  if (options.kind === 'agent') {
    out(`  restarting ${unit} (an upgrade, say) keeps its engines serving: the new agent adopts them;`);
    out('  to stop the engines too, drain the node first: llmgw ctl drain <node>');
  }
}
