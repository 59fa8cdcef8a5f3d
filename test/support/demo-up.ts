// The demo exactly as a newcomer gets it: `llmgw up` from the built CLI on a
// fresh data directory, nothing in its catalog edited, the API key it made
// read from where it says it keeps it. The client-library matrix
// (test/clients/) runs against this so that "works with library X" means
// "works on what `npm start` brings up", not on a fleet set up by hand.
// Separate from processes.ts because it also confines the run: its own state
// dir (up's pointer file goes there, not into the user's home) and a fetch
// that refuses anything beyond loopback, since several client libraries
// phone home by default (tracing, tokenizer downloads).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startLlmgw } from './processes.js';

export interface DemoUp {
  /** The client listener's base URL, without a path (`http://127.0.0.1:PORT`). */
  client: string;
  /** The API key `llmgw up` made and printed on its first run. */
  apiKey: string;
  /** The admin listener's base URL (API, dashboard and /metrics). */
  admin: string;
  /** The file `llmgw up` keeps its admin token in. */
  adminTokenFile: string;
  /** URLs this process tried to fetch beyond loopback (each was refused); a test expects it empty. */
  strayFetches: string[];
  /** Ctrl-C, as a terminal sends it; resolves once up (and the engines it owns) exited. */
  stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);

/** Starts `llmgw up` on ephemeral ports and resolves when it prints ready. */
export async function startDemoUp(name: string): Promise<DemoUp> {
  const dir = mkdtempSync(join(tmpdir(), `llmgw-${name}-`));
  const dataDir = join(dir, 'data');
  const up = startLlmgw(
    [
      'up',
      '--data-dir',
      dataDir,
      '--client-addr',
      '127.0.0.1:0',
      '--admin-addr',
      '127.0.0.1:0',
      '--agent-addr',
      '127.0.0.1:0',
    ],
    { env: { XDG_STATE_HOME: join(dir, 'state') } },
  );
  let ready: Record<string, unknown>;
  try {
    ready = await up.waitForLog((e) => e.msg === 'llmgw up ready', 180_000);
  } catch (err) {
    // Not ready is no reason to leave it running: the error already carries what it printed.
    await up.stop('SIGINT');
    throw err;
  }
  const apiKey = readFileSync(String(ready.api_key_file), 'utf8').trim();

  const strayFetches: string[] = [];
  const realFetch = globalThis.fetch;
  globalThis.fetch = (input: Parameters<typeof fetch>[0], init?: Parameters<typeof fetch>[1]) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    if (!LOOPBACK.has(url.hostname)) {
      strayFetches.push(url.href);
      return Promise.reject(new Error(`the client matrix stays on loopback; refused ${url.href}`));
    }
    return realFetch(input, init);
  };

  return {
    client: String(ready.client),
    apiKey,
    admin: String(ready.admin),
    adminTokenFile: join(String(ready.data_dir), 'admin-token'),
    strayFetches,
    async stop() {
      globalThis.fetch = realFetch;
      const exit = await up.stop('SIGINT');
      rmSync(dir, { recursive: true, force: true });
      return exit;
    },
  };
}
