// `llmgw ctl` at a terminal: run in a real pseudo-terminal (a private tmux
// server), it colours states and draws tables that fit the window, asks
// before removing a model (and keeps it on "n"), and --watch
// re-renders until Ctrl-C and then exits 0. The pipe form (no colour) is
// checked in ctl.test.ts; this is the other half of that promise.
import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient } from '../../src/api/index.js';
import { startControl, stopAll } from '../support/processes.js';
import { waitFor } from '../support/wait.js';
import { ANSI_RE, CTL_ARGV } from './ctl-support.js';

const ADMIN = 'e2e-ctl-tty-admin-token-0123456789';
const WIDTH = 80;
// Our own server socket: the developer's tmux sessions are never touched, and kill-server ends only this one.
const SOCKET = `llmgw-ctl-test-${process.pid}-${Date.now()}`;

let adminUrl: string;
let api: AdminClient;

function tmux(...args: string[]): string {
  return execFileSync('tmux', ['-L', SOCKET, ...args], { encoding: 'utf8' });
}

/** Starts ctl in a fresh tmux window; the pane stays open after it exits so the screen can be read. */
function startInTerminal(session: string, ctlArgs: string[]): void {
  const quoted = [process.execPath, ...CTL_ARGV, ...ctlArgs].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
  tmux(
    'new-session',
    '-d',
    '-s',
    session,
    '-x',
    String(WIDTH),
    '-y',
    '50',
    '-e',
    `LLMGW_ADMIN_URL=${adminUrl}`,
    '-e',
    `LLMGW_ADMIN_TOKEN=${ADMIN}`,
    `${quoted}; echo "EXIT=$?"; exec cat`,
  );
}

function screen(session: string): string {
  // -e keeps the escape sequences: the colour is what is being checked.
  return tmux('capture-pane', '-p', '-e', '-t', session);
}

const strip = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, ''); // eslint-disable-line no-control-regex

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-e2e-ctl-tty-'));
  const control = await startControl([
    '--store',
    `sqlite:${join(dir, 'db')}`,
    '--join-token',
    'e2e-ctl-tty-join-0123456789abcdef',
    '--admin-token',
    ADMIN,
    '--log-level',
    'warn',
  ]);
  adminUrl = control.urls.admin;
  api = new AdminClient({ baseUrl: adminUrl, token: ADMIN });
  // min 0 and --force: a catalog to draw without a fleet to run it. The long source must wrap, not overflow.
  await api.addModel(
    {
      name: 'wide',
      source: 'hf://some-organisation/a-repository-name-long-enough-to-overflow-an-eighty-column-terminal',
      scaling: { min: 0 },
      profiles: [{ engine: 'sim' }],
    },
    { force: true },
  );
  await api.addModel(
    { name: 'wanted', source: 'hf://org/wanted', scaling: { min: 1 }, profiles: [{ engine: 'sim' }] },
    { force: true },
  );
});

afterAll(async () => {
  try {
    tmux('kill-server');
  } catch {
    // No server was started (tmux missing): nothing to end.
  }
  await stopAll();
});

describe('llmgw ctl in a terminal', () => {
  it('colours states and fits its tables to the window', async () => {
    startInTerminal('models', ['models']);
    const shown = await waitFor('ctl models to finish in the terminal', async () => {
      const s = screen('models');
      return s.includes('EXIT=') ? s : undefined;
    });
    expect(strip(shown), shown).toContain('EXIT=0');
    expect(shown, 'a terminal gets colour').toMatch(ANSI_RE);
    // A model that wants a replica and has none ready is red (31); one that wants none is green (32).
    expect(shown).toMatch(/\x1b\[31m0\/0/); // eslint-disable-line no-control-regex
    const tableLines = strip(shown)
      .split('\n')
      .map((l) => l.trimEnd())
      .filter((l) => /^[┌│├└]/.test(l));
    expect(tableLines.length, shown).toBeGreaterThan(3);
    for (const l of tableLines)
      expect(l.length, `a table line wider than ${WIDTH} columns wrapped:\n${strip(shown)}`).toBeLessThanOrEqual(WIDTH);
    for (const l of tableLines) expect(/[┐│┤┘]$/.test(l), `a table line was broken by the terminal: ${l}`).toBe(true);
  });

  it('asks before removing a model when a person is at the terminal, and keeps it on no', async () => {
    const answer = async (session: string, key: string): Promise<string> => {
      startInTerminal(session, ['models', 'rm', 'wanted']);
      await waitFor('the question', async () => (strip(screen(session)).includes('[y/N]') ? true : undefined));
      tmux('send-keys', '-t', session, key, 'Enter');
      return waitFor('ctl to finish', async () => {
        const s = strip(screen(session));
        return s.includes('EXIT=') ? s : undefined;
      });
    };
    const no = await answer('rm-no', 'n');
    expect(no).toContain('EXIT=1');
    expect(no).toContain('model wanted was not removed');
    expect((await api.models()).map((m) => m.name)).toContain('wanted');
    const yes = await answer('rm-yes', 'y');
    expect(yes).toContain('EXIT=0');
    expect((await api.models()).map((m) => m.name)).not.toContain('wanted');
  });

  it('re-renders with --watch until Ctrl-C, then exits 0', async () => {
    startInTerminal('watch', ['summary', '--watch']);
    // The whole first render, to its last line: a Ctrl-C sent mid-render is echoed (^C) into the line being drawn.
    await waitFor('the first render', async () => {
      const s = strip(screen('watch'));
      return s.includes('Ctrl-C to stop') && /^attention /m.test(s) ? true : undefined;
    });
    tmux('send-keys', '-t', 'watch', 'C-c');
    const shown = await waitFor('ctl to stop watching', async () => {
      const s = strip(screen('watch'));
      return s.includes('EXIT=') ? s : undefined;
    });
    expect(shown).toContain('EXIT=0');
    expect(shown).toMatch(/^models\s+\d+ \(/m);
  });
});
