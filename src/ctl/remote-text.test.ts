// Guards against `ctl model` hiding why a remote is out of routing, or a
// peer's load that keeps spill-over local.
import { describe, expect, it } from 'vitest';
import { remoteText } from './remote-text.js';

describe('remoteText', () => {
  it.each([
    [{ healthy: true, reason: '' }, 'in routing'],
    [{ healthy: true, reason: 'not probed yet' }, 'in routing (not probed yet)'],
    [
      { healthy: true, reason: '', ready: 2, running: 7, waiting: 3 },
      'in routing; peer: 2 ready, 7 running, 3 waiting',
    ],
    [
      { healthy: false, reason: 'the peer has no ready replica of "big"', ready: 0, running: 0, waiting: 0 },
      'out of routing: the peer has no ready replica of "big" (peer: 0 ready, 0 running, 0 waiting)',
    ],
    [{ healthy: false, reason: 'unreachable: ECONNREFUSED' }, 'out of routing: unreachable: ECONNREFUSED'],
  ])('%j → %s', (view, text) => {
    expect(remoteText(view)).toBe(text);
  });
});
