#!/usr/bin/env node
// The installed entry point. The code lives in dist/ (built by `npm run build`);
// a checkout that was never built gets a sentence saying so rather than a stack.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const main = new URL('../dist/cli/main.js', import.meta.url);
if (!existsSync(fileURLToPath(main))) {
  process.stderr.write('llmgw is not built yet: run `npm run build` (or `npm start`, which builds first)\n');
  process.exit(2);
}
await import(main.href);
