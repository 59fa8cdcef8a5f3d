// Sessions on their own: expiry, the bound on how many are kept, the open
// mode of a control plane that needs no admin token, and sessions shared
// through a real store by two instances.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyRequest } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { Store, StoredSessions } from '../store/index.js';
import { cookieValue, csrfProblem, LoginThrottle, type SessionBackend, sessionCookie, Sessions } from './session.js';

const request = (headers: Record<string, string>) => ({ headers }) as unknown as FastifyRequest;

describe('dashboard sessions', () => {
  it('forgets a session idle past its timeout', async () => {
    let now = 0;
    const sessions = new Sessions({ adminToken: 't', now: () => now, idleTimeoutMs: 1000 });
    const s = await sessions.create('dashboard:127.0.0.1');
    const cookie = sessionCookie(s, false).split(';')[0]!;
    now = 900;
    expect((await sessions.fromRequest(request({ cookie })))?.id).toBe(s.id);
    now = 1800;
    expect(await sessions.fromRequest(request({ cookie })), 'used at 900, so still alive at 1800').not.toBeNull();
    now = 3000;
    expect(await sessions.fromRequest(request({ cookie }))).toBeNull();
  });

  it('keeps at most maxSessions, dropping the oldest', async () => {
    const sessions = new Sessions({ adminToken: 't', now: () => 0, maxSessions: 2 });
    const first = await sessions.create('a');
    await sessions.create('b');
    await sessions.create('c');
    expect(sessions.size).toBe(2);
    expect(await sessions.fromRequest(request({ cookie: `llmgw_session=${first.id}` }))).toBeNull();
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

  it('lets a form without Origin or Fetch Metadata through on its token alone (older browsers)', async () => {
    const sessions = new Sessions({ adminToken: 't', now: () => 0 });
    const s = await sessions.create('a');
    expect(csrfProblem(request({ host: 'h:1' }), s, s.csrfToken)).toBeNull();
    expect(
      csrfProblem(request({ host: 'h:1', origin: 'http://h:1', 'sec-fetch-site': 'same-origin' }), s, s.csrfToken),
    ).toBeNull();
    expect(csrfProblem(request({ host: 'h:1', origin: 'null' }), s, s.csrfToken)).toMatch(/another origin/);
  });
});

describe('dashboard sessions in the store', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  /** Two control planes' session tables over one SQLite file. */
  async function twoInstances(options: { now?: () => number; maxSessions?: number } = {}) {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-sessions-'));
    const store = await Store.open({ location: { kind: 'sqlite', path: join(dir, 'db') } });
    cleanups.push(async () => {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    });
    const backend = new StoredSessions(store.connection);
    const make = () =>
      new Sessions({
        adminToken: 't',
        now: options.now ?? (() => 1_000_000),
        backend,
        ...(options.maxSessions ? { maxSessions: options.maxSessions } : {}),
      });
    return { store, backend, a: make(), b: make() };
  }
  const cookieOf = (s: { id: string }) => request({ cookie: `llmgw_session=${s.id}` });

  it('holds a login made on one control plane on another, with the same CSRF token, and a logout on either ends it on both', async () => {
    const { store, a, b } = await twoInstances();
    const session = await a.create('dashboard:10.0.0.7');
    const seen = await b.fromRequest(cookieOf(session));
    expect(seen, 'the other instance knows it').toMatchObject({
      id: session.id,
      csrfToken: session.csrfToken,
      actor: 'dashboard:10.0.0.7',
    });
    const rows = await store.connection.db.selectFrom('dashboard_sessions').selectAll().execute();
    expect(
      rows.map((r) => r.id_hash),
      'the store holds a hash, never the cookie',
    ).not.toContain(session.id);
    await b.end(seen!);
    expect(await a.fromRequest(cookieOf(session)), 'logged out there, so out here too').toBeNull();
  });

  it('expires a session by the last use on any instance, and keeps the table bounded', async () => {
    let now = 1_000_000;
    const { store, a, b } = await twoInstances({ now: () => now, maxSessions: 3 });
    const s = await a.create('x');
    now += 7 * 3600_000;
    expect(await b.fromRequest(cookieOf(s)), 'used on b after 7 h').not.toBeNull();
    now += 7 * 3600_000;
    expect(await a.fromRequest(cookieOf(s)), 'idle 7 h since its use on b, within 8 h').not.toBeNull();
    now += 9 * 3600_000;
    expect(await a.fromRequest(cookieOf(s)), 'idle past 8 h').toBeNull();
    for (let i = 0; i < 5; i++) {
      now += 1000;
      await b.create(`login ${i}`);
    }
    expect(
      (await store.connection.db.selectFrom('dashboard_sessions').select('actor').execute()).map((r) => r.actor).sort(),
    ).toEqual(['login 2', 'login 3', 'login 4']);
  });

  it('finds a stored session only with the admin token it was made under: rotating the token logs everyone out', async () => {
    const { backend } = await twoInstances();
    const at = (adminToken: string | null) => new Sessions({ adminToken, now: () => 1_000_000, backend });
    const before = await at('token-a').create('x');
    expect(await at('token-a').fromRequest(cookieOf(before)), 'another instance with the same token').not.toBeNull();
    expect(await at('token-b').fromRequest(cookieOf(before)), 'after the token changed').toBeNull();
    const open = await at(null).create('loopback');
    expect(
      await at('token-a').fromRequest(cookieOf(open)),
      'a session of a token-less loopback instance is not one here',
    ).toBeNull();
  });

  it('while the store is away: pages only for sessions it confirmed lately, no forms, no login, no logout that does not reach the store', async () => {
    const { backend } = await twoInstances();
    let now = 1_000_000;
    const failures: string[] = [];
    let away = false;
    const gate = <T>(call: () => Promise<T>) => (away ? Promise.reject(new Error('store away')) : call());
    const flaky: SessionBackend = {
      put: (x) => gate(() => backend.put(x)),
      get: (h) => gate(() => backend.get(h)),
      touch: (h, t) => gate(() => backend.touch(h, t)),
      delete: (h) => gate(() => backend.delete(h)),
      prune: (i, c, k) => gate(() => backend.prune(i, c, k)),
    };
    const here = new Sessions({
      adminToken: 't',
      now: () => now,
      backend: flaky,
      onBackendError: (_err, doing) => failures.push(doing),
    });
    const elsewhere = new Sessions({ adminToken: 't', now: () => now, backend });
    const known = await here.create('x');
    const other = await elsewhere.create('y');
    away = true;
    expect(await here.fromRequest(cookieOf(known)), 'confirmed by the store just now: pages still open').not.toBeNull();
    expect(await here.fromRequest(cookieOf(other)), 'never confirmed here: refused').toBeNull();
    await expect(
      here.fromRequest(cookieOf(known), 'change'),
      'a form needs the store to say it was not ended',
    ).rejects.toThrow(/cannot confirm the dashboard session/);
    await expect(here.create('z'), 'a login that would hold on one instance only is refused').rejects.toThrow(
      /logging in needs the store/,
    );
    await expect(here.end(known), 'a logout that did not reach the store is not pretended').rejects.toThrow(
      /still valid, so log out again/,
    );
    now += 5 * 60_000 + 1;
    expect(await here.fromRequest(cookieOf(known)), 'unconfirmed for over five minutes: refused').toBeNull();
    away = false;
    now += 1;
    expect(await here.fromRequest(cookieOf(known)), 'the store is back and the session was never ended').not.toBeNull();
    expect(failures).toEqual(
      expect.arrayContaining([
        'reading a dashboard session',
        'saving a new dashboard session',
        'ending a dashboard session',
      ]),
    );
  });

  it('does not hang a page on a store that does not answer', async () => {
    const { backend } = await twoInstances();
    const sessions = new Sessions({ adminToken: 't', now: () => 1_000_000, backend, storeReadTimeoutMs: 50 });
    const s = await sessions.create('x');
    const silent: SessionBackend = {
      put: (x) => backend.put(x),
      get: () => new Promise(() => undefined),
      touch: (h, t) => backend.touch(h, t),
      delete: (h) => backend.delete(h),
      prune: (i, c, k) => backend.prune(i, c, k),
    };
    const hung = new Sessions({ adminToken: 't', now: () => 1_000_000, backend: silent, storeReadTimeoutMs: 50 });
    expect(
      await hung.fromRequest(cookieOf(s)),
      'never confirmed by this instance, and the store is silent: refused, not hung',
    ).toBeNull();
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
