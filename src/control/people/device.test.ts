// The caps on device sign-ins waiting at once. They guard against two
// failures seen in review: the cap was checked before the provider was
// asked and counted only sign-ins already waiting, so starts arriving
// together all passed it; and one address could take every slot, locking
// everyone else out of ctl login. The provider here never answers until
// the test says so: each start holds its slot while it waits.
import { describe, expect, it } from 'vitest';
import { isLlmgwError } from '../../errors/index.js';
import { DeviceSignIns, MAX_PENDING_DEVICE_SIGN_INS, MAX_PENDING_DEVICE_SIGN_INS_PER_ADDRESS } from './device.js';
import type { OidcSignIn } from './oidc.js';
import type { People } from './people.js';

/** A provider whose discovery waits until `fail()`: every start in the meantime is waiting on it. */
function stalledProvider() {
  let fail: (err: Error) => void = () => {};
  let stalled = new Promise<never>((_resolve, reject) => (fail = reject));
  const sso = {
    config: { scopes: 'openid' },
    provider: () => stalled,
  } as unknown as OidcSignIn;
  return {
    sso,
    fail(): void {
      fail(new Error('discovery failed'));
      // From now on the provider fails at once.
      stalled = Promise.reject(new Error('discovery failed'));
      stalled.catch(() => undefined);
    },
  };
}

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'ok';
  } catch (err) {
    return isLlmgwError(err) ? err.code : String(err);
  }
}

describe('device sign-ins waiting at once', () => {
  it('holds a slot from the start, so starts arriving together cannot pass the cap', async () => {
    const p = stalledProvider();
    const device = new DeviceSignIns(p.sso, {} as People, () => 0);
    const waiting = Array.from({ length: MAX_PENDING_DEVICE_SIGN_INS }, (_, i) =>
      codeOf(device.start(`10.0.${i >> 8}.${i & 255}`)),
    );
    const over = await codeOf(device.start('10.9.9.9'));
    expect(over).toBe('LLMGW_RATE_LIMITED');
    p.fail();
    expect(new Set(await Promise.all(waiting))).toEqual(new Set(['LLMGW_UPSTREAM']));
    // Every slot came back with its failed start: the next one is refused by the provider, not by the cap.
    expect(await codeOf(device.start('10.9.9.9'))).toBe('LLMGW_UPSTREAM');
  });

  it('lets one address hold only its share, and others still start', async () => {
    const p = stalledProvider();
    const device = new DeviceSignIns(p.sso, {} as People, () => 0);
    const mine = Array.from({ length: MAX_PENDING_DEVICE_SIGN_INS_PER_ADDRESS }, () =>
      codeOf(device.start('10.0.0.1')),
    );
    let refusal: unknown = null;
    await device.start('10.0.0.1').catch((err: unknown) => (refusal = err));
    expect(isLlmgwError(refusal) && refusal.code).toBe('LLMGW_RATE_LIMITED');
    expect((refusal as Error).message).toMatch(/from this address/);
    // Another address is not held back by the first one's share.
    const theirs = codeOf(device.start('10.0.0.2'));
    p.fail();
    expect(await theirs).toBe('LLMGW_UPSTREAM');
    expect(new Set(await Promise.all(mine))).toEqual(new Set(['LLMGW_UPSTREAM']));
    expect(await codeOf(device.start('10.0.0.1'))).toBe('LLMGW_UPSTREAM');
  });
});
