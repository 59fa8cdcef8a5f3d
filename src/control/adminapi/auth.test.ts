// The admin guard over a whole control plane with app.inject. The first test
// guards against the bypass that cost a working API key and code on a GPU
// node: the token was checked on the raw URL's `/api/` prefix, so any route
// reached another way (an escape, an absolute-form target) was open. Here
// every route the admin app knows is walked, and one added after the fact.
import { describe, expect, it } from 'vitest';
import { inProcessPlanes } from '../../../test/support/control-plane.js';

const TOKEN = 'admin-token-for-tests-0123456789';
const plane = inProcessPlanes({ admin_token: TOKEN });

/** A concrete URL for a route pattern: every parameter and wildcard filled. */
function concrete(url: string): string {
  return url.replace(/:[A-Za-z_]+/g, 'x').replace(/\*/g, 'x');
}

describe('admin guard: deny by default', () => {
  it('refuses every route on the admin app without credentials, unless it declared itself public', async () => {
    const p = await plane();
    // Registered after the control plane was built, by "someone else", with no thought of auth.
    p.adminApp.get('/api/v1/added-later', async () => ({ secret: true }));
    p.adminApp.post('/added-later-elsewhere', async () => ({ changed: true }));
    await p.adminApp.ready();
    const routes = p.adminGuard.routes();
    expect(routes.length, 'the guard saw the routes being registered').toBeGreaterThan(20);
    const publicOnes = routes
      .filter((r) => r.access === 'public')
      .map((r) => `${r.method} ${r.url}`)
      .sort();
    expect(publicOnes, 'only the login page is public').toEqual(['GET /login', 'HEAD /login', 'POST /login']);
    expect(routes.map((r) => r.url)).toContain('/api/v1/added-later');

    for (const route of routes) {
      if (route.access === 'public') continue;
      const res = await p.adminApp.inject({
        method: route.method as 'GET',
        url: concrete(route.url),
        headers: { 'content-type': 'application/json' },
        ...(route.method === 'GET' || route.method === 'HEAD' ? {} : { payload: '{}' }),
      });
      const what = `${route.method} ${route.url} (${route.access}) answered ${res.statusCode} without credentials`;
      if (route.access === 'admin') expect(res.statusCode, what).toBe(401);
      // A dashboard page sends a browser to the login page; a dashboard form is refused.
      else expect([303, 403], what).toContain(res.statusCode);
    }
  });

  it('answers an unknown path 401 without the token and 404 only with it, so routes cannot be mapped', async () => {
    const p = await plane();
    const anon = await p.adminApp.inject({ method: 'GET', url: '/api/v1/no-such-thing' });
    expect(anon.statusCode).toBe(401);
    expect(anon.json()).toEqual({
      error: 'this admin API needs Authorization: Bearer <admin token> (set LLMGW_ADMIN_TOKEN for ctl)',
    });
    const wrongVerb = await p.adminApp.inject({ method: 'PUT', url: '/api/v1/keys' });
    expect(wrongVerb.statusCode, 'a 405 would say the path exists').toBe(401);
    const authed = await p.adminApp.inject({
      method: 'GET',
      url: '/api/v1/no-such-thing',
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(authed.statusCode).toBe(404);
    const wrong = await p.adminApp.inject({
      method: 'GET',
      url: '/api/v1/keys',
      headers: { authorization: 'Bearer not-the-token-at-all' },
    });
    expect(wrong.statusCode).toBe(401);
    expect(wrong.json()).toEqual({ error: 'the admin token is wrong' });
  });

  it('lets a dashboard page in with the admin token as well as with a session', async () => {
    const p = await plane();
    const res = await p.adminApp.inject({
      method: 'GET',
      url: '/nodes',
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['content-type']).toMatch(/text\/html/);
  });

  it('asks the admin token for /metrics unless metrics_public is set', async () => {
    const closed = await plane();
    expect((await closed.adminApp.inject({ method: 'GET', url: '/metrics' })).statusCode).toBe(401);
    expect(
      (await closed.adminApp.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${TOKEN}` } }))
        .statusCode,
    ).toBe(200);
    const open = await plane({ metrics_public: true });
    expect((await open.adminApp.inject({ method: 'GET', url: '/metrics' })).statusCode).toBe(200);
    expect((await open.adminApp.inject({ method: 'GET', url: '/api/v1/keys' })).statusCode, 'only /metrics opens').toBe(
      401,
    );
  });

  it('refuses a state-changing call that is not JSON (415) or comes from another origin (403), token or not', async () => {
    const p = await plane({ admin_token: undefined });
    const post = (headers: Record<string, string>, payload = '{"name":"x"}') =>
      p.adminApp.inject({ method: 'POST', url: '/api/v1/keys', headers, payload });
    const plain = await post({ 'content-type': 'text/plain' });
    expect(plain.statusCode).toBe(415);
    expect(plain.json<{ error: string }>().error).toMatch(/Content-Type: application\/json/);
    expect((await post({ 'content-type': 'application/x-www-form-urlencoded' }, 'name=x')).statusCode).toBe(415);
    expect((await post({ 'content-type': 'application/json', origin: 'http://evil.example' })).statusCode).toBe(403);
    expect((await post({ 'content-type': 'application/json', origin: 'null' })).statusCode).toBe(403);
    expect((await post({ 'content-type': 'application/json', 'sec-fetch-site': 'cross-site' })).statusCode).toBe(403);
    const keys = await p.adminApp.inject({ method: 'GET', url: '/api/v1/keys' });
    expect(keys.json<{ keys: unknown[] }>().keys, 'no refused call made a key').toEqual([]);
    // The same page's own origin, and a script that sends neither header, still work.
    expect(
      (await post({ 'content-type': 'application/json', origin: 'http://localhost:80', host: 'localhost:80' }))
        .statusCode,
    ).toBe(201);
    expect((await post({ 'content-type': 'application/json; charset=utf-8' })).statusCode).toBe(201);
    // A DELETE with no body needs no type.
    const id = (await p.adminApp.inject({ method: 'GET', url: '/api/v1/keys' })).json<{ keys: { id: string }[] }>()
      .keys[0]!.id;
    expect((await p.adminApp.inject({ method: 'DELETE', url: `/api/v1/keys/${id}` })).statusCode).toBe(200);
  });

  it('answers only to its own address and loopback names, and to admin_hosts', async () => {
    const p = await plane({ admin_hosts: 'gw.example.com, 10.0.0.5' });
    const get = (host: string) =>
      p.adminApp.inject({ method: 'GET', url: '/api/v1/keys', headers: { host, authorization: `Bearer ${TOKEN}` } });
    const rebound = await get('evil.example:8081');
    expect(rebound.statusCode).toBe(421);
    expect(rebound.json<{ error: string }>().error).toMatch(/admin_hosts \(LLMGW_ADMIN_HOSTS\)/);
    for (const host of [
      '127.0.0.1:8081',
      'localhost',
      '[::1]:8081',
      'gw.example.com',
      'GW.example.com.:443',
      '10.0.0.5:8081',
    ]) {
      expect((await get(host)).statusCode, host).toBe(200);
    }
  });
});
