// Builds dist/ once per test run so that end-to-end tests start the same
// `llmgw` a user would run, never a stale build.
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export default function setup(): void {
  const root = fileURLToPath(new URL('..', import.meta.url));
  execFileSync(process.execPath, [`${root}node_modules/typescript/bin/tsc`, '-p', 'tsconfig.build.json'], {
    cwd: root,
    stdio: 'inherit',
  });
}
