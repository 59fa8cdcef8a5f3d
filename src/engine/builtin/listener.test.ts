// The builtin engine's listener bounds: how many connections it holds, and
// that a flood of silent ones cannot keep the gateway (or the agent's
// health probe) out.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { SilentConnections } from '../../../test/support/silent-connections.js';
import { waitFor } from '../../../test/support/wait.js';
import { makeTinyModel } from '../../dev/make-model/index.js';
import { engineConnectionCap } from './listener.js';
import { startBuiltinEngine, type BuiltinEngine } from './server.js';

let dir: string;
let engine: BuiltinEngine | null = null;
/** Ends an engine's model load that never finishes, so close() need not wait for it. */
let endLoad: (err: Error) => void = () => undefined;
const silent = new SilentConnections();

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'llmgw-builtin-listener-'));
  await makeTinyModel(join(dir, 'tiny.gguf'));
});
afterEach(async () => {
  silent.destroyAll();
  endLoad(new Error('the test is over'));
  await engine?.close();
  engine = null;
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('the builtin engine’s connections', () => {
  it('holds one for each request it runs or queues and 64 more, within half the open files it does not keep', () => {
    expect(engineConnectionCap({ parallel: 4, maxQueue: 16 }, null)).toBe(84);
    expect(engineConnectionCap({ parallel: 4, maxQueue: 16 }, 1 << 20)).toBe(84);
    // 200 files: 64 kept for the process, half the rest for the listener.
    expect(engineConnectionCap({ parallel: 4, maxQueue: 16 }, 200)).toBe(68);
    expect(engineConnectionCap({ parallel: 1, maxQueue: 0 }, 50)).toBe(16);
    // A queue of a million is the operator's choice; the open files still bound what silent clients can take.
    expect(engineConnectionCap({ parallel: 8, maxQueue: 1_000_000 }, 65_536)).toBe(30_720);
  });

  // Attack: the engine binds the node's address for the gateway, so anyone on that network could open
  // connections and send nothing until the engine had no descriptor left, and the gateway no way in.
  it('closes silent connections past its cap, and still answers the probe and says so once', async () => {
    const logged: string[] = [];
    engine = await startBuiltinEngine(
      {
        modelPath: join(dir, 'tiny.gguf'),
        aliases: ['tiny'],
        threads: 1,
        parallel: 1,
        maxQueue: 0,
        log: (line) => logged.push(line),
      },
      // Stays loading until the test ends: the listener's bounds do not wait for a model.
      { loadRuntime: () => new Promise<never>((_, reject) => (endLoad = reject)) },
    );
    const port = Number(new URL(engine.url).port);
    await silent.open(port, 100);
    // A cap of 1 + 0 + 64 = 65: the flood past it made room by closing its own oldest.
    await waitFor('35 of the 100 closed', () => silent.closed >= 35);
    const health = await fetch(`${engine.url}/health`);
    expect(health.status, '503 is "loading": the probe got through').toBe(503);
    expect(silent.closed, 'no more than the flood past the cap, and the probe’s own connection').toBeLessThanOrEqual(
      36,
    );
    const warnings = logged.filter((l) => l.includes('at its connection cap (65)'));
    expect(warnings, 'one line says what happens, not one per connection closed').toHaveLength(1);
  });
});
