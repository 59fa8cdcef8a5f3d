// Regression: an agent started with --engine-host 0.0.0.0 (as the README's
// second-machine example does) named 127.0.0.1 in its endpoints, which a
// control plane on another machine rightly refuses, so none of its replicas
// could ever be routed to.
import { describe, expect, it } from 'vitest';
import { advertisedHost, localAddressToward } from './advertise.js';

describe('the address a node is reached at', () => {
  it("is the operator's --advertise-host when given, brackets dropped", async () => {
    expect(
      await advertisedHost({
        engineHost: '0.0.0.0',
        advertiseHost: '10.1.2.3',
        controlUrls: ['http://127.0.0.1:8082'],
      }),
    ).toBe('10.1.2.3');
    expect(await advertisedHost({ engineHost: '::', advertiseHost: '[fd00::7]', controlUrls: [] })).toBe('fd00::7');
  });

  it('is a specific engine host as it is', async () => {
    expect(await advertisedHost({ engineHost: '10.0.0.12', controlUrls: ['http://127.0.0.1:8082'] })).toBe('10.0.0.12');
  });

  it('is, for a wildcard, the local address the route to the control plane leaves from', async () => {
    expect(
      await advertisedHost({ engineHost: '0.0.0.0', controlUrls: ['http://127.0.0.2:8082', 'http://192.0.2.1:8082'] }),
      'the first control URL decides',
    ).toBe('127.0.0.1');
    expect(await localAddressToward('https://[::1]:8082')).toBe('::1');
  });

  it('is unknown (null) for a control URL it cannot read or a wildcard with no control URL', async () => {
    expect(await localAddressToward('not a url')).toBeNull();
    expect(await advertisedHost({ engineHost: '0.0.0.0', controlUrls: [] })).toBeNull();
  });
});
