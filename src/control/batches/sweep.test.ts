// The sweep of files_dir. Guards against bytes left on disk for good by a
// crash: a writer's temporary file (killed mid-write), an upload whose row
// was never written; and against the opposite, worse failure: removing a
// file a row names, or one an upload or an end in progress is about to name.
import { mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { orphans, sweepFiles, SWEEP_GRACE_MS } from './sweep.js';

const id = (c: string) => `file-${c.repeat(32)}`;
const NOW = 10 * SWEEP_GRACE_MS;
const OLD = NOW - SWEEP_GRACE_MS;
const FRESH = NOW - SWEEP_GRACE_MS + 1;

describe('which entries of files_dir are orphans', () => {
  const named = new Set([id('a')]);
  const cases: [string, string, number, boolean][] = [
    ['a file a row names, however old', id('a'), 0, false],
    ['a file no row names, past the grace', id('b'), OLD, true],
    ['a file no row names, within the grace (an upload or end in progress)', id('b'), FRESH, false],
    ["a writer's temporary file, past the grace", `.${id('a')}.0a1b2c3d.tmp`, OLD, true],
    ["a writer's temporary file, within the grace", `.${id('a')}.0a1b2c3d.tmp`, FRESH, false],
    ['something llmgw did not name', 'notes.txt', 0, false],
    ['a name almost like a file id', `file-${'g'.repeat(32)}`, 0, false],
  ];
  for (const [what, name, mtimeMs, gone] of cases) {
    it(`${gone ? 'removes' : 'keeps'} ${what}`, () => {
      expect(orphans([{ name, mtimeMs }], named, NOW)).toEqual(gone ? [name] : []);
    });
  }
});

describe('sweeping files_dir', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  it('removes old temporary and unnamed files, and nothing else', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-sweep-'));
    dirs.push(dir);
    const put = (name: string, mtimeMs: number) => {
      writeFileSync(join(dir, name), 'x');
      utimesSync(join(dir, name), mtimeMs / 1000, mtimeMs / 1000);
    };
    const temp = `.${id('c')}.00ff00ff.tmp`;
    put(id('a'), OLD); // named
    put(id('b'), OLD); // orphan
    put(id('d'), FRESH); // an upload in progress
    put(temp, OLD);
    put('README', OLD);
    const asked: string[][] = [];
    const removed = await sweepFiles({
      dir,
      named: async (ids) => {
        asked.push([...ids].sort());
        return new Set(ids.filter((i) => i === id('a')));
      },
      now: () => NOW,
      logger: pino({ level: 'silent' }),
    });
    expect(removed.sort()).toEqual([temp, id('b')].sort());
    expect(readdirSync(dir).sort()).toEqual(['README', id('a'), id('d')].sort());
    expect(asked, 'the store is asked once, for file ids only').toEqual([[id('a'), id('b'), id('d')]]);
  });

  it('is nothing to do when files_dir does not exist yet', async () => {
    const removed = await sweepFiles({
      dir: join(tmpdir(), `llmgw-sweep-none-${process.pid}`, 'files'),
      named: async () => new Set(),
      now: () => NOW,
      logger: pino({ level: 'silent' }),
    });
    expect(removed).toEqual([]);
  });
});
