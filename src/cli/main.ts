// The one `llmgw` executable and its subcommands. Each subcommand is a thin
// shell over its part (control, agent, ctl, up, engine): parse flags, build,
// run, and turn a typed error into a sentence and an exit code. Exit codes:
// 0 ok, 1 failed, 2 usage or configuration error.
import { Command, Option } from 'commander';
import { isLlmgwError } from '../errors/index.js';
import { runControl } from './control.js';

const program = new Command()
  .name('llmgw')
  .description('One OpenAI-compatible endpoint in front of your GPU fleet')
  .version(process.env.npm_package_version ?? '0.1.0')
  .showHelpAfterError()
  .exitOverride((err) => {
    process.exit(err.exitCode === 0 ? 0 : 2);
  });

const control = program.command('control').description('run the control plane (client, admin and agent listeners)');
control.addOption(new Option('--config <file>', 'YAML configuration file'));
for (const [key, help] of Object.entries(CONTROL_FLAG_HELP())) {
  control.addOption(new Option(`--${key.replaceAll('_', '-')} <value>`, help));
}
control.action(async (opts: Record<string, string | undefined>) => {
  await runControl(opts);
});

for (const [name, issue] of [
  ['agent', 'the node agent'],
  ['ctl', 'the operator CLI'],
  ['up', 'the one-command quick start'],
  ['engine', 'the builtin and sim engines'],
] as const) {
  program
    .command(name)
    .description(`${issue} (not yet)`)
    .allowUnknownOption()
    .allowExcessArguments()
    .action(() => {
      process.stderr.write(`llmgw ${name}: not yet: ${issue} has not landed in this build\n`);
      process.exit(2);
    });
}

function CONTROL_FLAG_HELP(): Record<string, string> {
  return {
    client_addr: 'client (inference) listener, host:port (default 127.0.0.1:8080)',
    admin_addr: 'admin API and dashboard listener (default 127.0.0.1:8081)',
    agent_addr: 'node agent listener (default 127.0.0.1:8082)',
    store: 'sqlite:PATH, a postgres:// URL, or none (default sqlite:./.llmgw/llmgw.db)',
    catalog: 'YAML file of models loaded at start',
    admin_token: 'token admin requests must carry (required off loopback)',
    admin_token_file: 'file holding the admin token',
    join_token: 'token node agents present to join',
    join_token_file: 'file holding the join token',
    log_level: 'fatal, error, warn, info, debug, trace or silent (default info)',
    node_stale_after: 'a node silent this long is stale (default 15s)',
    node_lost_after: 'a node silent this long is lost and its work moved (default 60s)',
    reconcile_interval: 'how often the reconciler runs without being notified (default 5s)',
  };
}

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (isLlmgwError(err)) {
    process.stderr.write(`llmgw: ${err.message}\n`);
    process.exit(err.code === 'LLMGW_CONFIG_INVALID' || err.code === 'LLMGW_CATALOG_INVALID' || err.code === 'LLMGW_CATALOG_CONFLICT' ? 2 : 1);
  }
  throw err;
}
