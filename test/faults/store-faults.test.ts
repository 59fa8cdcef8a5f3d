// The embedded SQLite store when its process is killed mid-write. An admin
// who got a 200 or 201 acts on it (hands a key to a customer, tells a team
// its model is in), so an acknowledged write that is gone after a crash is a
// silent lie. Writes whose answer never came may go either way; the ones
// answered must all be there.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { stopAll } from '../support/processes.js';
import { waitFor } from '../support/wait.js';
import { adminHeaders, Fleet } from './fleet-support.js';

afterAll(stopAll);

describe('store faults', () => {
  it('SIGKILL during a stream of admin writes: every acknowledged model and key is there after a restart', async () => {
    const fleet = new Fleet(mkdtempSync(join(tmpdir(), 'llmgw-faults-store-')), 31400);
    const control = await fleet.startControl();
    const models: string[] = [];
    const keys: string[] = [];
    let dead = false;

    // Four writers at once, two adding models and two creating keys, until the process is gone.
    const writer = async (kind: 'model' | 'key', w: number) => {
      for (let i = 0; !dead; i++) {
        const name = `${kind}-${w}-${i}`;
        try {
          if (kind === 'model') {
            // force: accepted without a node to run it; the write is what is tested.
            const res = await fetch(`${fleet.admin}/api/v1/models?force=true`, {
              method: 'POST',
              headers: adminHeaders,
              body: JSON.stringify({ name, source: 'hf://org/repo', profiles: [{ engine: 'sim' }] }),
            });
            if (res.status === 200) models.push(name);
          } else {
            const res = await fleet.api<{ id: string }>('POST', '/api/v1/keys', { name });
            if (res.status === 201) keys.push(res.body.id);
          }
        } catch {
          // No answer: the process died with this write in flight; it may or may not have landed.
        }
      }
    };
    const writers = [writer('model', 1), writer('model', 2), writer('key', 1), writer('key', 2)];
    await waitFor(
      'writes acknowledged before the kill',
      async () => (models.length >= 20 && keys.length >= 20 ? true : undefined),
      60_000,
    );
    await control.stop('SIGKILL');
    dead = true;
    await Promise.all(writers);

    await fleet.startControl();
    const storedModels = new Set(
      (await fleet.api<{ name: string }[]>('GET', '/api/v1/models')).body.map((m) => m.name),
    );
    const storedKeys = new Set(
      (await fleet.api<{ keys: { id: string }[] }>('GET', '/api/v1/keys')).body.keys.map((k) => k.id),
    );
    expect(
      models.filter((m) => !storedModels.has(m)),
      `acknowledged models lost (of ${models.length})`,
    ).toEqual([]);
    expect(
      keys.filter((k) => !storedKeys.has(k)),
      `acknowledged keys lost (of ${keys.length})`,
    ).toEqual([]);
  }, 180_000);
});
