import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'src/**/*.test.tsx', 'test/**/*.test.ts'],
    // End-to-end tests spawn `node dist/cli/main.js`; build once before any test runs.
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores: real processes per test file, so keep the fan-out modest.
    maxWorkers: 2,
  },
});
