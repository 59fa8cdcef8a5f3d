// What `npm pack` puts in the package people install: the built code and
// its entry point, the operator's docs and deploy files, never sources,
// tests or build state. Read from npm's own listing (scripts skipped: the
// suite's globalSetup has built dist/ already, and prepack's clean build
// would pull it from under the other tests).
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/** The lowest release of each Node line llmgw supports: 22.12 and 24 load ES modules from require() unflagged, as 20.19 does. */
const SUPPORTED_NODES = ['20.19.0', '22.12.0', '24.0.0'];

/**
 * Whether `version` satisfies an `engines.node` range, in the forms npm
 * packages use (`>=18`, `^20.17.0 || >=22.9.0`, `10.* || >= 12.*`,
 * `>=16 || 14 >=14.17`, `*`). Parsed here rather than with a semver library
 * llmgw does not depend on; an unreadable range throws, so a new form is
 * seen rather than passed.
 */
function satisfies(version: string, range: string): boolean {
  const v = version.split('.').map(Number);
  const compare = (parts: number[]): number => {
    for (let i = 0; i < parts.length; i++) if (v[i] !== parts[i]) return v[i]! - parts[i]!;
    return 0;
  };
  const test = (comparator: string): boolean => {
    const m = /^(>=|<=|>|<|\^|~|=)?v?(\*|\d+)(?:\.(\d+|[x*]))?(?:\.(\d+|[x*]))?$/.exec(comparator);
    if (!m) throw new Error(`unreadable engines range "${range}"`);
    const [, op = '', ...raw] = m;
    const parts = raw.filter((p): p is string => p !== undefined && p !== 'x' && p !== '*').map(Number);
    if (raw[0] === '*') return true;
    const c = compare(parts);
    switch (op) {
      case '>=':
        return c >= 0;
      case '>':
        return c > 0;
      case '<=':
        return c <= 0;
      case '<':
        return c < 0;
      case '^':
        return c >= 0 && v[0] === parts[0];
      case '~':
        return c >= 0 && v[0] === parts[0] && (parts.length < 2 || v[1] === parts[1]);
      default:
        return c === 0;
    }
  };
  return range.split('||').some((alt) =>
    alt
      .trim()
      .replace(/([<>=^~]+)\s+/g, '$1')
      .split(/\s+/)
      .every(test),
  );
}

const root = fileURLToPath(new URL('..', import.meta.url));

describe('the npm package', () => {
  const [listing] = JSON.parse(
    execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: root, encoding: 'utf8' }),
  ) as { files: { path: string }[] }[];
  const files = listing!.files.map((f) => f.path);

  it("ships the built code, its entry point and the operator's files", () => {
    for (const path of [
      'bin/llmgw.js',
      'dist/cli/main.js',
      'dist/version.js',
      'package.json',
      'README.md',
      'docs/operations.md',
      'deploy/prometheus/llmgw-alerts.yml',
    ]) {
      expect(files, path).toContain(path);
    }
  });

  it('ships no sources, tests, benches, source maps or build state', () => {
    expect(
      files.filter((f) => /^(src|test|bench|scripts|\.ci)\//.test(f) || /\.test\.|\.map$|tsbuildinfo/.test(f)),
    ).toEqual([]);
  });

  it('needs no package that refuses a supported Node line (npm would warn EBADENGINE on install)', () => {
    type Lock = { packages: Record<string, { version?: string; dev?: boolean; engines?: { node?: string } }> };
    const lock = JSON.parse(readFileSync(`${root}/package-lock.json`, 'utf8')) as Lock;
    const refusals = Object.entries(lock.packages).flatMap(([path, pkg]) =>
      pkg.dev || !pkg.engines?.node
        ? []
        : SUPPORTED_NODES.filter((node) => !satisfies(node, pkg.engines!.node!)).map(
            (node) => `${path}@${pkg.version} wants node ${pkg.engines!.node}, not ${node}`,
          ),
    );
    expect(refusals, 'production dependencies must install cleanly on every supported Node line').toEqual([]);
  });

  it('says which Node versions it runs on, and is installable (not private)', () => {
    const pkg = JSON.parse(readFileSync(`${root}/package.json`, 'utf8')) as {
      private?: boolean;
      engines?: { node?: string };
      bin?: Record<string, string>;
    };
    expect(pkg.private).toBeUndefined();
    expect(pkg.engines?.node).toMatch(/^>=20/);
    expect(pkg.bin).toEqual({ llmgw: 'bin/llmgw.js' });
  });
});
