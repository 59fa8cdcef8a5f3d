// `llmgw up` stopped and started again on its data directory, with a chat
// completion sent the moment it prints ready. Guards the restart race of
// issue 35: the second start read the demo replica back from the store as
// ready, printed "demo: ready [0.0s]" and "llmgw up ready" before its agent
// had started the engine again, and the request got 502 connection refused
// (LLMGW_UPSTREAM) instead of being held as for a cold start.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, processesUnder, type RunningProcess, startLlmgw, stopAll } from '../support/processes.js';
import { waitFor } from '../support/wait.js';

const dir = mkdtempSync(join(tmpdir(), 'llmgw-up-restart-'));
const dataDir = join(dir, 'data');

afterAll(async () => {
  await stopAll();
  rmSync(dir, { recursive: true, force: true });
});

async function upReady(args: string[]): Promise<{ up: RunningProcess; client: string }> {
  const up = startLlmgw(['up', '--data-dir', dataDir, ...args]);
  const ready = await up.waitForLog((e) => e.msg === 'llmgw up ready', 180_000);
  return { up, client: String(ready.client) };
}

async function chat(client: string): Promise<{ status: number; body: string }> {
  const key = readFileSync(join(dataDir, 'api-key'), 'utf8').trim();
  const res = await fetch(`${client}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'demo', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 4 }),
  });
  return { status: res.status, body: await res.text() };
}

describe('llmgw up restarted on its data directory', () => {
  it(
    'answers a request sent the moment it prints ready, not 502 from the stored state',
    { timeout: 420_000 },
    async () => {
      const ports = [await freePort(), await freePort(), await freePort()];
      const args = [
        '--client-addr',
        `127.0.0.1:${ports[0]}`,
        '--admin-addr',
        `127.0.0.1:${ports[1]}`,
        '--agent-addr',
        `127.0.0.1:${ports[2]}`,
      ];

      const first = await upReady(args);
      const before = await chat(first.client);
      expect(before.status, `the first start answers: ${before.body}`).toBe(200);
      // Ctrl-C: up stops its agent and engines, and the store keeps the demo replica as ready.
      expect(await first.up.stop('SIGINT')).toEqual({ code: 0, signal: null });
      await waitFor(
        () => `the first start's engines to end: ${processesUnder(dataDir).join(', ')}`,
        () => processesUnder(dataDir).length === 0,
        { timeoutMs: 30_000, intervalMs: 200 },
      );

      const second = await upReady(args);
      // No wait at all between the ready line and the request: that is the gap the stored state used to hide.
      const after = await chat(second.client);
      expect(after.status, `the request right after ready: ${after.body}`).toBe(200);
      expect(second.up.stderr(), 'the demo is not called ready from the stored state at once').not.toMatch(
        /demo: ready {2}\[0\.0s\]/,
      );
      expect(await second.up.stop('SIGINT')).toEqual({ code: 0, signal: null });
    },
  );
});
