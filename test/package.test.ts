// What `npm pack` puts in the package people install: the built code and
// its entry point, the operator's docs and deploy files, never sources,
// tests or build state. Read from npm's own listing (scripts skipped: the
// suite's globalSetup has built dist/ already, and prepack's clean build
// would pull it from under the other tests).
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));

describe('the npm package', () => {
  const [listing] = JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: root, encoding: 'utf8' })) as { files: { path: string }[] }[];
  const files = listing!.files.map((f) => f.path);

  it('ships the built code, its entry point and the operator\'s files', () => {
    for (const path of ['bin/llmgw.js', 'dist/cli/main.js', 'dist/version.js', 'package.json', 'README.md', 'docs/operations.md', 'deploy/prometheus/llmgw-alerts.yml']) {
      expect(files, path).toContain(path);
    }
  });

  it('ships no sources, tests, benches, source maps or build state', () => {
    expect(files.filter((f) => /^(src|test|bench|scripts|\.ci)\//.test(f) || /\.test\.|\.map$|tsbuildinfo/.test(f))).toEqual([]);
  });

  it('says which Node versions it runs on, and is installable (not private)', () => {
    const pkg = JSON.parse(readFileSync(`${root}/package.json`, 'utf8')) as { private?: boolean; engines?: { node?: string }; bin?: Record<string, string> };
    expect(pkg.private).toBeUndefined();
    expect(pkg.engines?.node).toMatch(/^>=20/);
    expect(pkg.bin).toEqual({ llmgw: 'bin/llmgw.js' });
  });
});
