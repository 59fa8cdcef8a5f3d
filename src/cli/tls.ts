// `llmgw tls init DIR`: writes a private CA and certificates for the control
// plane and each node named, then says which file goes to which flag. The
// X.509 work is in src/tls/init.ts, loaded only when this command runs.
import { LlmgwError } from '../errors/index.js';
import { CLI_DEFAULTS } from './defaults.js';

/** `llmgw tls init`'s flags; absent lists are empty, absent days = CLI_DEFAULTS.tlsInit.days. */
export interface TlsInitFlags {
  name?: string[];
  host?: string[];
  days?: string;
  force?: boolean;
}

export async function runTlsInit(
  dir: string,
  flags: TlsInitFlags,
  out: (line: string) => void = (l) => process.stdout.write(`${l}\n`),
): Promise<void> {
  const { initTls, parseNodeArg } = await import('../tls/init.js');
  const days = flags.days ?? String(CLI_DEFAULTS.tlsInit.days);
  if (!/^\d+$/.test(days))
    throw new LlmgwError(
      'LLMGW_CONFIG_INVALID',
      `--days: want a whole number of days, like ${CLI_DEFAULTS.tlsInit.days}; got "${days}"`,
    );
  const result = await initTls({
    dir,
    controlHosts: (flags.host ?? [])
      .flatMap((h) => h.split(','))
      .map((h) => h.trim())
      .filter(Boolean),
    nodes: (flags.name ?? []).map(parseNodeArg),
    days: Number(days),
    force: flags.force === true,
  });
  for (const f of result.files) out(`wrote ${f.path}  ${f.what}`);
  for (const w of result.warnings) out(`warning: ${w}`);
  const file = (name: string) => result.files.find((f) => f.path.endsWith(`/${name}`))?.path ?? name;
  out('');
  out('next:');
  out(`  control plane:  tls_cert: ${file('control.pem')}  tls_key: ${file('control-key.pem')}  (all three listeners)`);
  out(`  agents:         --ca ${file('ca.pem')}  and an https:// --control URL`);
  out(`  ctl:            --ca ${file('ca.pem')}  (or LLMGW_CA) and an https:// --admin-url`);
}
