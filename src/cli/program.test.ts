// Regression tests for defaults written twice: a commander default beside
// the part's own (the port range, the heartbeat interval and the listen
// addresses were each in two or three places) lets `--help` and the
// behaviour drift apart the day one of them changes. So no option may
// declare a default, and --help must still print each one, from the table.
import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { AGENT_DEFAULTS } from '../agent/defaults/index.js';
import { CONTROL_DEFAULTS } from '../control/config/index.js';
import { formatDurationMs } from '../units/index.js';
import { CLI_DEFAULTS } from './defaults.js';
import { buildProgram } from './program.js';

/** Every command under `root`, itself included, with its path ("llmgw tls init"). */
function commands(root: Command, path = root.name()): [string, Command][] {
  return [[path, root], ...root.commands.flatMap((c) => commands(c, `${path} ${c.name()}`))];
}

/** A command's --help text, one line per option however long (no wrapping to a terminal's width). */
function helpOf(path: string): string {
  const found = commands(buildProgram()).find(([p]) => p === path);
  if (!found) throw new Error(`no command ${path}`);
  return found[1].configureHelp({ helpWidth: 100_000 }).helpInformation();
}

/** The help line of one flag, found by its long name. */
function line(help: string, flag: string): string {
  const found = help.split('\n').find((l) => l.trimStart().startsWith(`${flag} `) || l.includes(`, ${flag} `));
  if (!found) throw new Error(`--help has no line for ${flag}:\n${help}`);
  return found;
}

describe('the llmgw command line', () => {
  it('declares no default on any option: each part fills its own from its table', () => {
    const all = commands(buildProgram());
    expect(all.length, 'walks the subcommands too').toBeGreaterThan(8);
    for (const [path, command] of all) {
      for (const option of command.options) {
        expect(
          option.defaultValue,
          `${path} ${option.flags} declares a default; put it in the part's defaults table and print it in the help`,
        ).toBeUndefined();
      }
    }
  });

  it('still shows every control plane default in llmgw control --help, read from CONTROL_DEFAULTS', () => {
    const help = helpOf('llmgw control');
    for (const [key, value] of Object.entries(CONTROL_DEFAULTS)) {
      expect(line(help, `--${key.replaceAll('_', '-')}`), key).toContain(`(default: ${value})`);
    }
    expect(line(help, '--client-addr')).toContain('(default: 127.0.0.1:8080)');
    expect(line(help, '--responses-ttl'), 'in the words an operator writes').toContain('(default: 30d)');
    expect(line(help, '--responses-max-per-key')).toContain('(default: 64m)');
  });

  it('still shows the agent defaults in llmgw agent --help, read from AGENT_DEFAULTS', () => {
    const help = helpOf('llmgw agent');
    expect(line(help, '--heartbeat-interval')).toContain('(default: 5s)');
    expect(line(help, '--port-range')).toContain('(default: 20000-20999)');
    expect(line(help, '--engine-host')).toContain('(default: 127.0.0.1)');
    expect(line(help, '--state-dir')).toContain(`(default: ${AGENT_DEFAULTS.stateDir})`);
    expect(line(help, '--mgmt-addr')).toContain(`(default: ${AGENT_DEFAULTS.mgmtAddr})`);
    expect(line(help, '--log-level')).toContain(`(default: ${AGENT_DEFAULTS.logLevel})`);
    expect(line(help, '--liveness-interval')).toContain(
      `(default: ${formatDurationMs(AGENT_DEFAULTS.livenessIntervalMs)})`,
    );
    expect(line(help, '--liveness-failures')).toContain(`(default: ${AGENT_DEFAULTS.livenessFailures})`);
    expect(line(help, '--load-interval')).toContain(`(default: ${formatDurationMs(AGENT_DEFAULTS.loadIntervalMs)})`);
  });

  it("shows up's listen addresses as the control plane's own, and the CLI's defaults from CLI_DEFAULTS", () => {
    const up = helpOf('llmgw up');
    expect(line(up, '--client-addr')).toContain(`(default: ${CONTROL_DEFAULTS.client_addr})`);
    expect(line(up, '--admin-addr')).toContain(`(default: ${CONTROL_DEFAULTS.admin_addr})`);
    expect(line(up, '--agent-addr')).toContain(`(default: ${CONTROL_DEFAULTS.agent_addr})`);
    expect(line(up, '--data-dir')).toContain(`(default: ${CLI_DEFAULTS.up.dataDir})`);
    expect(line(helpOf('llmgw tls init'), '--days')).toContain('(default: 365)');
    const service = helpOf('llmgw install-service');
    expect(line(service, '--unit-dir')).toContain('(default: /etc/systemd/system)');
    expect(line(service, '--user')).toContain(`(default: ${CLI_DEFAULTS.installService.user})`);
  });

  it('leaves an absent flag absent, so the part and not commander decides what it means', async () => {
    const program = buildProgram();
    const agent = program.commands.find((c) => c.name() === 'agent')!;
    let seen: Record<string, unknown> | null = null;
    agent.action((opts: Record<string, unknown>) => {
      seen = opts;
    });
    await program.parseAsync(['agent', '--control', 'http://127.0.0.1:8082', '--fabric', 'ib0=10.0.0.1'], {
      from: 'user',
    });
    expect(seen).toEqual({ control: 'http://127.0.0.1:8082', fabric: ['ib0=10.0.0.1'] });
  });
});
