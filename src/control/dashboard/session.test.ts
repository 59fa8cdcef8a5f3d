// Sessions on their own: expiry, the bound on how many are kept, and the
// open mode of a control plane that needs no admin token.
import type { FastifyRequest } from 'fastify';
import { describe, expect, it } from 'vitest';
import { cookieValue, csrfProblem, LoginThrottle, sessionCookie, Sessions } from './session.js';

const request = (headers: Record<string, string>) => ({ headers }) as unknown as FastifyRequest;

describe('dashboard sessions', () => {
  it('forgets a session idle past its timeout', () => {
    let now = 0;
    const sessions = new Sessions({ adminToken: 't', now: () => now, idleTimeoutMs: 1000 });
    const s = sessions.create('dashboard:127.0.0.1');
    const cookie = sessionCookie(s, false).split(';')[0]!;
    now = 900;
    expect(sessions.fromRequest(request({ cookie }))?.id).toBe(s.id);
    now = 1800;
    expect(sessions.fromRequest(request({ cookie })), 'used at 900, so still alive at 1800').not.toBeNull();
    now = 3000;
    expect(sessions.fromRequest(request({ cookie }))).toBeNull();
  });

  it('keeps at most maxSessions, dropping the oldest', () => {
    const sessions = new Sessions({ adminToken: 't', now: () => 0, maxSessions: 2 });
    const first = sessions.create('a');
    sessions.create('b');
    sessions.create('c');
    expect(sessions.size).toBe(2);
    expect(sessions.fromRequest(request({ cookie: `llmgw_session=${first.id}` }))).toBeNull();
  });

  it('checks the token in constant time and accepts anything when no token is configured', () => {
    expect(new Sessions({ adminToken: 'right', now: () => 0 }).tokenMatches('wrong')).toBe(false);
    expect(new Sessions({ adminToken: 'right', now: () => 0 }).tokenMatches('right')).toBe(true);
    expect(new Sessions({ adminToken: null, now: () => 0 }).open).toBe(true);
  });

  it('reads one cookie among several', () => {
    expect(cookieValue('a=1; llmgw_session=abc; b=2', 'llmgw_session')).toBe('abc');
    expect(cookieValue(undefined, 'x')).toBeUndefined();
  });

  it('lets a form without Origin or Fetch Metadata through on its token alone (older browsers)', () => {
    const sessions = new Sessions({ adminToken: 't', now: () => 0 });
    const s = sessions.create('a');
    expect(csrfProblem(request({ host: 'h:1' }), s, s.csrfToken)).toBeNull();
    expect(csrfProblem(request({ host: 'h:1', origin: 'http://h:1', 'sec-fetch-site': 'same-origin' }), s, s.csrfToken)).toBeNull();
    expect(csrfProblem(request({ host: 'h:1', origin: 'null' }), s, s.csrfToken)).toMatch(/another origin/);
  });
});

describe('login throttle', () => {
  it('refuses an address after too many wrong tokens until the window has passed, and only that address', () => {
    let now = 0;
    const throttle = new LoginThrottle(() => now, 3, 60_000);
    for (let i = 0; i < 3; i++) throttle.fail('10.0.0.1');
    expect(throttle.retryAfterSeconds('10.0.0.1')).toBe(60);
    expect(throttle.retryAfterSeconds('10.0.0.2')).toBe(0);
    now = 30_000;
    expect(throttle.retryAfterSeconds('10.0.0.1')).toBe(30);
    now = 60_001;
    expect(throttle.retryAfterSeconds('10.0.0.1')).toBe(0);
  });
});
