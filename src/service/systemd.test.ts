// The systemd units as an operator gets them: the rules that matter read
// from the text, the files written with the right modes, and the units
// checked by systemd's own verifier where it is installed (and in CI).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { install, renderEnvFile, renderUnit, type ServiceKind, SERVICE_NOFILE } from './systemd.js';

const script = fileURLToPath(new URL('../../bin/llmgw.js', import.meta.url));
const options = (kind: ServiceKind, envDir = '/etc/llmgw') => ({
  kind,
  node: process.execPath,
  script,
  user: 'llmgw',
  envDir,
  stateName: 'llmgw',
  // As `llmgw install-service control` gives it (src/cli/service.test.ts).
  ...(kind === 'control' ? { nodeOptions: '--max-semi-space-size=64' } : {}),
});

/** `Key=value` lines of a unit, by key (a key given twice keeps both). */
function directives(unit: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const line of unit.split('\n')) {
    const m = /^([A-Za-z]+)=(.*)$/.exec(line);
    if (m) out.set(m[1]!, [...(out.get(m[1]!) ?? []), m[2]!]);
  }
  return out;
}

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('renderUnit', () => {
  it('stops only the agent, so a restart or an upgrade keeps its engines serving', () => {
    expect(directives(renderUnit(options('agent'))).get('KillMode')).toEqual(['process']);
    expect(
      directives(renderUnit(options('control'))).get('KillMode'),
      'the control plane has no children to keep',
    ).toBeUndefined();
  });

  it.each(['control', 'agent'] as const)(
    'runs the %s as its own user, restarts it, sizes its open files, and reads its tokens from a file',
    (kind) => {
      const d = directives(renderUnit(options(kind)));
      expect(d.get('User')).toEqual(['llmgw']);
      expect(d.get('Restart')).toEqual(['always']);
      expect(d.get('LimitNOFILE')).toEqual([String(SERVICE_NOFILE)]);
      expect(d.get('EnvironmentFile')).toEqual([`/etc/llmgw/${kind}.env`]);
      const exec = d.get('ExecStart')![0]!;
      expect(exec.startsWith(`${process.execPath} ${script} ${kind}`), exec).toBe(true);
      expect(exec, 'no secret on the command line, where ps shows it').not.toMatch(/token|secret|password/i);
    },
  );

  it('names the control plane URLs for the agent from its environment file', () => {
    expect(directives(renderUnit(options('agent'))).get('ExecStart')![0]).toContain(
      '--control ${LLMGW_CONTROL} --state-dir /var/lib/llmgw/agent',
    );
    expect(renderEnvFile('agent')).toMatch(/^LLMGW_CONTROL=/m);
    expect(renderEnvFile('agent')).toMatch(/^LLMGW_JOIN_TOKEN=$/m);
    expect(renderEnvFile('control')).toMatch(/^LLMGW_ADMIN_TOKEN=$/m);
    // An empty admin token no longer means an open admin API: `llmgw control` makes one (issue 33); the file says where.
    expect(renderEnvFile('control')).toMatch(/^# Left empty, the admin token is made at first start in admin-token/m);
  });

  it.each([
    { over: { node: 'node' }, want: /--node: want an absolute path/ },
    { over: { envDir: '/etc/my llmgw' }, want: /--env-dir: .* space/ },
    { over: { user: 'root; rm' }, want: /--user: want a system user name/ },
    { over: { nodeOptions: '--x=1; rm -rf /' }, want: /NODE_OPTIONS for the unit: want node flags/ },
  ])('refuses $over', ({ over, want }) => {
    expect(() => renderUnit({ ...options('control'), ...over })).toThrow(want);
  });
});

describe('install', () => {
  it('writes the unit, and the environment file 0600 only when there is none: it holds secrets', () => {
    const root = mkdtempSync(join(tmpdir(), 'llmgw-service-'));
    dirs.push(root);
    const o = options('agent', join(root, 'etc'));
    const first = install(o, join(root, 'units'));
    expect(first.envWritten).toBe(true);
    expect(statSync(first.envPath).mode & 0o777).toBe(0o600);
    expect(readFileSync(first.unitPath, 'utf8')).toBe(renderUnit(o));
    writeFileSync(first.envPath, 'LLMGW_JOIN_TOKEN=filled-in\n');
    const again = install(o, join(root, 'units'));
    expect(again.envWritten).toBe(false);
    expect(readFileSync(first.envPath, 'utf8'), "the operator's tokens are kept").toBe('LLMGW_JOIN_TOKEN=filled-in\n');
  });
});

describe('systemd-analyze verify', () => {
  const analyze = spawnSync('systemd-analyze', ['--version'], { encoding: 'utf8' });
  const available = analyze.status === 0;
  if (!available && process.env.CI)
    throw new Error('systemd-analyze is not installed; .ci/run installs systemd for this test');

  it.skipIf(!available).each(['control', 'agent'] as const)('accepts the %s unit', (kind) => {
    const root = mkdtempSync(join(tmpdir(), 'llmgw-verify-'));
    dirs.push(root);
    const { unitPath } = install(options(kind, join(root, 'etc')), root);
    const result = spawnSync('systemd-analyze', ['verify', unitPath], { encoding: 'utf8' });
    expect(result.status, `${result.stdout}${result.stderr}`).toBe(0);
    // verify warns without failing on some problems (an unknown directive, a bad value): none is expected.
    expect(
      `${result.stdout}${result.stderr}`
        .split('\n')
        .filter((l) => l.includes(unitPath) || /unknown|invalid|ignoring/i.test(l)),
    ).toEqual([]);
  });
});
