import { defineConfig } from 'vitest/config';

// Tests that run the built llmgw (dist/ and bin/llmgw.js): every test under
// test/, and the few unit files beside the code that spawn engines or import
// the built CLI. Only they wait for the build; every other unit file runs
// straight from source, so `npx vitest run src/gateway/core/rate-limit.test.ts` takes
// seconds instead of a tsc run first.
const BUILT_UNIT_FILES = [
  'src/agent/engines/adapters.test.ts',
  'src/agent/supervisor/process.test.ts',
  'src/agent/supervisor/supervisor.test.ts',
  'src/engine/builtin/cli.test.ts',
  'src/engine/sim/process.test.ts',
];

export default defineConfig({
  test: {
    pool: 'forks',
    // TMPDIR points at a directory of the run's own, removed when it ends (test/temp-root.ts).
    globalSetup: ['test/temp-root.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores: real processes per test file, so keep the fan-out modest.
    maxWorkers: 2,
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['src/**/*.test.ts', 'src/**/*.test.tsx'],
          exclude: BUILT_UNIT_FILES,
          // One module graph per worker, not one per file: importing it again for each of ~280 files was most of
          // the project's time (imports 154 s, the whole run 198 s; 18 s and 56 s without). So a unit file ends
          // what it started (servers, timers, connections) in its own after-hooks, as they all do: what one left
          // running, the next file would meet.
          isolate: false,
        },
      },
      {
        extends: true,
        test: {
          name: 'built',
          include: ['test/**/*.test.ts', ...BUILT_UNIT_FILES],
          // End-to-end tests spawn `node dist/cli/main.js`; build once before any of them runs.
          globalSetup: ['test/global-setup.ts'],
        },
      },
    ],
  },
});
