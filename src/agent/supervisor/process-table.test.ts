// The identity checks adoption rests on: this very process as seen in /proc,
// and command lines under interpreters and wrappers.
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { cmdlineMatches, linuxProcessTable } from './process-table.js';
import { waitFor } from '../../../test/support/wait.js';

describe('linuxProcessTable', () => {
  it.runIf(process.platform === 'linux')(
    'reads a stable start token and the command line of a live process, and nothing for a dead one',
    async () => {
      const table = linuxProcessTable();
      const self = table.identity(process.pid);
      expect(self?.startToken).toMatch(/^[0-9a-f-]+:\d+$/);
      expect(table.identity(process.pid)?.startToken, 'the same on a second read').toBe(self?.startToken);
      expect(
        cmdlineMatches(process.argv, self?.cmdline ?? []),
        `our own argv ends our own command line: ${self?.cmdline.join(' ')}`,
      ).toBe(true);

      const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)', 'marker-arg'], {
        detached: true,
        stdio: 'ignore',
      });
      try {
        await new Promise((resolve) => child.once('spawn', resolve));
        const identity = table.identity(child.pid!);
        expect(identity?.cmdline).toEqual([process.execPath, '-e', 'setTimeout(() => {}, 60000)', 'marker-arg']);
        expect(identity?.startToken, 'another process, another start token').not.toBe(self?.startToken);
        expect(table.groupAlive(child.pid!), 'it leads its own group').toBe(true);
      } finally {
        table.signalGroup(child.pid!, 'SIGKILL');
      }
      await waitFor(
        'the killed child to read as no process (dead, or a zombie)',
        () => table.identity(child.pid!) === null,
        { timeoutMs: 10_000, intervalMs: 20 },
      );
      expect(table.identity(child.pid!), 'dead (or a zombie) reads as no process').toBeNull();
      expect(table.groupAlive(child.pid!)).toBe(false);
    },
  );

  it('never signals group 0, 1 or its own', () => {
    const table = linuxProcessTable();
    expect(table.signalGroup(0, 'SIGTERM')).toBe(false);
    expect(table.signalGroup(1, 'SIGTERM')).toBe(false);
    expect(table.groupAlive(1)).toBe(false);
  });
});

describe('cmdlineMatches', () => {
  it('accepts our argv under an interpreter or a wrapper that execs, and nothing else', () => {
    const argv = ['vllm', 'serve', '/m', '--port', '20001'];
    expect(cmdlineMatches(argv, ['vllm', 'serve', '/m', '--port', '20001'])).toBe(true);
    expect(cmdlineMatches(argv, ['/usr/bin/python3', '/venv/bin/vllm', 'serve', '/m', '--port', '20001'])).toBe(true);
    expect(cmdlineMatches(argv, ['/usr/bin/node', '/tmp/stand-in.mjs', 'vllm', 'serve', '/m', '--port', '20001'])).toBe(
      true,
    );
    expect(
      cmdlineMatches(argv, ['/usr/bin/python3', '/venv/bin/vllm', 'serve', '/m', '--port', '20002']),
      'another port',
    ).toBe(false);
    expect(
      cmdlineMatches(argv, ['/usr/bin/python3', '/venv/bin/sglang', 'serve', '/m', '--port', '20001']),
      'another program',
    ).toBe(false);
    expect(cmdlineMatches(argv, ['serve', '/m', '--port', '20001']), 'no program before the arguments').toBe(false);
    expect(cmdlineMatches([], ['x'])).toBe(false);
  });
});
