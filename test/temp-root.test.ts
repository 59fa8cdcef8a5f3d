// The test run's own temporary directory (temp-root.ts): what tests and the
// processes they start write under os.tmpdir() goes there, and it is gone
// when the run ends, whether or not each test removed what it made.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { TEST_TMPDIR_VAR, useRunTmpdir } from './temp-root.js';

describe("the test run's temporary directory", () => {
  it('is where this test, and a process it starts, make temporary files', () => {
    const root = process.env[TEST_TMPDIR_VAR];
    expect(root, 'the global setup named it').toBeTruthy();
    expect(basename(root!)).toMatch(/^llmgw-test-/);
    expect(tmpdir()).toBe(root);
    const child = execFileSync(process.execPath, ['-p', 'require("node:os").tmpdir()'], { encoding: 'utf8' });
    expect(child.trim(), 'a child inherits it').toBe(root);
  });

  it('is made once, and removed with everything in it by the call that made it', () => {
    const env: NodeJS.ProcessEnv = { TMPDIR: tmpdir() };
    const before = env.TMPDIR;
    const end = useRunTmpdir(env);
    const root = env.TMPDIR!;
    expect(root).not.toBe(before);
    expect(dirname(root)).toBe(before);
    expect(env[TEST_TMPDIR_VAR]).toBe(root);
    expect(
      statSync(root).mode & 0o777,
      'others pass through (Postgres runs as its own user) but neither list nor write',
    ).toBe(0o711);

    // What a test leaves behind: a file, a directory with a file in it.
    mkdirSync(join(root, 'llmgw-plane-x', 'state'), { recursive: true });
    writeFileSync(join(root, 'llmgw-plane-x', 'state', 'store.sqlite'), 'x');
    writeFileSync(join(root, 'left.log'), 'x');

    // A later call (the next project's setup, a vitest inside a test) uses it and leaves it alone.
    const again = useRunTmpdir(env);
    expect(env.TMPDIR).toBe(root);
    again();
    expect(existsSync(join(root, 'left.log')), 'a later call does not remove it').toBe(true);

    end();
    expect(existsSync(root), 'removed whole').toBe(false);
    expect(env.TMPDIR, 'TMPDIR as it was').toBe(before);
    expect(env[TEST_TMPDIR_VAR]).toBeUndefined();
  });

  it('leaves no TMPDIR behind where there was none', () => {
    const env: NodeJS.ProcessEnv = {};
    const end = useRunTmpdir(env);
    const root = env.TMPDIR!;
    expect(existsSync(root)).toBe(true);
    end();
    expect(existsSync(root)).toBe(false);
    expect('TMPDIR' in env).toBe(false);
  });
});
