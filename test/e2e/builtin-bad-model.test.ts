// A malformed model must cost one replica, never the agent: the builtin
// engine always runs as a child process and checks the GGUF before loading,
// so a truncated file fails the shard with a clear error while the agent
// keeps reporting and serving everything else.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { makeTinyModel } from '../../src/dev/make-model/index.js';
import { killEnginesOf, startControl, startLlmgw, stopAll } from '../support/processes.js';
import { waitFor } from '../support/wait.js';

const JOIN = 'e2e-join-token-0123456789abcdef';
const ADMIN = 'e2e-admin-token-0123456789abcdef';
const headers = { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' };
const stateDirs: string[] = [];

afterAll(async () => {
  await stopAll();
  killEnginesOf(stateDirs);
});

describe('a truncated GGUF on the builtin engine', () => {
  it('fails the replica with the reason, and the agent stays up', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-e2e-badgguf-'));
    const good = join(dir, 'good.gguf');
    await makeTinyModel(good, { seed: 3 });
    const bytes = readFileSync(good);
    const truncated = join(dir, 'truncated.gguf');
    writeFileSync(truncated, bytes.subarray(0, Math.floor(bytes.length / 2)));

    const control = await startControl([
      '--store',
      `sqlite:${join(dir, 'db')}`,
      '--join-token',
      JOIN,
      '--admin-token',
      ADMIN,
      '--reconcile-interval',
      '300ms',
      '--log-level',
      'warn',
    ]);
    stateDirs.push(join(dir, 'b1'));
    const agent = startLlmgw([
      'agent',
      '--control',
      control.urls.agent,
      '--join-token',
      JOIN,
      '--node-id',
      'b1',
      '--state-dir',
      join(dir, 'b1'),
      '--simulate',
      'gpus=0,ram=16g',
      '--heartbeat-interval',
      '300ms',
      '--port-range',
      '24600-24649',
      '--log-level',
      'warn',
    ]);
    await waitFor('the node up', async () => {
      const nodes = (await (await fetch(`${control.urls.admin}/api/v1/nodes`, { headers })).json()) as {
        liveness: string;
      }[];
      return nodes[0]?.liveness === 'up' || undefined;
    });
    const add = await fetch(`${control.urls.admin}/api/v1/models`, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        name: 'broken',
        source: `file://${truncated}`,
        profiles: [{ engine: 'builtin', memory_gb: 1 }],
      }),
    });
    expect(add.status, await add.clone().text()).toBe(200);

    const failed = await waitFor(
      'the replica failed with the reason',
      async () => {
        const [r] = (await (await fetch(`${control.urls.admin}/api/v1/replicas?model=broken`, { headers })).json()) as {
          state: string;
          error?: string;
          shards: { error?: string }[];
        }[];
        const error = r?.error ?? r?.shards[0]?.error;
        return error && /GGUF|gguf/.test(error) ? { ...r, error } : undefined;
      },
      60_000,
    );
    expect(failed.error).toMatch(/LLMGW_GGUF_INVALID|truncated|GGUF/);

    expect(agent.child.exitCode, 'the agent is still running').toBeNull();
    const nodes = (await (await fetch(`${control.urls.admin}/api/v1/nodes`, { headers })).json()) as {
      liveness: string;
    }[];
    expect(nodes[0]!.liveness, 'and still reporting').toBe('up');
  });
});
