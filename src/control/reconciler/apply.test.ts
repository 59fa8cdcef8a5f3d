import { parseArgs } from 'node:util';
import { describe, expect, it } from 'vitest';
import { ENGINE_SECRET_PREFIX, newEngineSecret } from './apply.js';

describe('newEngineSecret', () => {
  // Bare base64url started with "-" one time in 64: vLLM and SGLang (argparse) and the builtin engine
  // (util.parseArgs, strict) then refused `--api-key -xyz`, and the replica, which keeps its secret for
  // life, could never start. 2000 draws of the old form miss a leading "-" with odds of about 1 in 10^13.
  it('never starts with "-", so every option parser takes it as the value of --api-key', () => {
    const secrets = Array.from({ length: 2000 }, () => newEngineSecret());
    expect(
      secrets.filter((s) => s.startsWith('-')),
      'secrets an option parser reads as a flag',
    ).toEqual([]);
    for (const secret of secrets.slice(0, 50)) {
      const { values } = parseArgs({
        args: ['--api-key', secret],
        options: { 'api-key': { type: 'string' } },
        strict: true,
      });
      expect(values['api-key'], 'a strict parser takes it as the value').toBe(secret);
    }
  });

  it('is 32 random bytes, base64url, behind the prefix that says what it is', () => {
    const secrets = Array.from({ length: 100 }, () => newEngineSecret());
    for (const secret of secrets) expect(secret).toMatch(new RegExp(`^${ENGINE_SECRET_PREFIX}[A-Za-z0-9_-]{43}$`));
    expect(new Set(secrets).size, 'no two alike').toBe(secrets.length);
  });
});
