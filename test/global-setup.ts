// Builds dist/ once per test run so that end-to-end tests start the same
// `llmgw` a user would run, never a stale build. Type errors do not stop the
// run here (tsc still emits): `npm test` type-checks on its own first, and a
// half-finished file elsewhere should not hide every other test's result.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export default function setup(): void {
  const root = fileURLToPath(new URL('..', import.meta.url));
  const result = spawnSync(process.execPath, [`${root}node_modules/typescript/bin/tsc`, '-p', 'tsconfig.build.json'], {
    cwd: root,
    encoding: 'utf8',
  });
  if (result.status !== 0) {
    process.stderr.write(
      `global setup: tsc reported problems (dist/ was still written):\n${result.stdout.slice(0, 4000)}\n`,
    );
  }
}
