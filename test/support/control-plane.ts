// Control planes in this process for tests that drive them with inject():
// each on a fresh SQLite file, silent, and closed after every test.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach } from 'vitest';
import { compileControlOptions } from '../../src/control/config/index.js';
import { ControlPlane } from '../../src/control/control-plane.js';

/**
 * A factory for control planes with `defaults` (config keys as written) under
 * each test's overrides; registers the afterEach that closes them, so call it
 * once at a test file's top level.
 */
export function inProcessPlanes(
  defaults: Record<string, unknown>,
): (over?: Record<string, unknown>) => Promise<ControlPlane> {
  const planes: ControlPlane[] = [];
  afterEach(async () => {
    await Promise.all(planes.splice(0).map((p) => p.close()));
  });
  return async (over = {}) => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-plane-'));
    const config = compileControlOptions({ store: `sqlite:${join(dir, 'db')}`, ...defaults, ...over });
    const p = await ControlPlane.create(config, { logger: pino({ level: 'silent' }) });
    planes.push(p);
    return p;
  };
}
