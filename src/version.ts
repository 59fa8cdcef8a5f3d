// llmgw's own version, from package.json, for agent reports and `--version`.
// Read once at start; dist/ and src/ both sit one level below the package root.
import { readFileSync } from 'node:fs';

function readVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version?: string };
    return pkg.version ?? '0.0.0';
  } catch {
    return '0.0.0';
  }
}

export const LLMGW_VERSION = readVersion();
