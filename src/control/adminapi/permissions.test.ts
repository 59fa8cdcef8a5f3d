// Every admin route against every role. Guards against two failures: a
// route registered without a declared permission (it must be admin-only,
// and this test names it so its author declares one), and a role let into
// a route its permissions do not cover (a viewer draining a node). The
// routes are read from the guard, which saw Fastify register each one, so
// a route added anywhere is walked without anyone listing it here.
import { describe, expect, it } from 'vitest';
import { inProcessPlanes } from '../../../test/support/control-plane.js';
import { allows, type Role, ROLES } from '../../http/index.js';

const TOKEN = 'admin-token-for-tests-0123456789';
const plane = inProcessPlanes({ admin_token: TOKEN });

function concrete(url: string): string {
  return url.replace(/:[A-Za-z_]+/g, 'x').replace(/\*/g, 'x');
}

/** Makes one person per role through the API and returns each one's token. */
async function tokensByRole(p: Awaited<ReturnType<typeof plane>>): Promise<Record<Role, string>> {
  const out = {} as Record<Role, string>;
  for (const role of ROLES) {
    const res = await p.adminApp.inject({
      method: 'POST',
      url: '/api/v1/people',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      payload: { name: `${role}-1`, role, ...(role === 'team-admin' ? { teams: ['default'] } : {}) },
    });
    expect(res.statusCode, res.body).toBe(201);
    out[role] = res.json<{ token: string }>().token;
  }
  return out;
}

/** A dashboard session for a token, signed in through the login form: its cookie and CSRF token. */
async function signIn(p: Awaited<ReturnType<typeof plane>>, token: string): Promise<{ cookie: string; csrf: string }> {
  const login = await p.adminApp.inject({
    method: 'POST',
    url: '/login',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams({ token }).toString(),
  });
  expect(login.statusCode, login.body).toBe(303);
  const cookie = String(login.headers['set-cookie']).split(';')[0]!;
  // Every page a session is shown, refused ones included, carries the logout form and its CSRF token.
  const page = await p.adminApp.inject({ method: 'GET', url: '/', headers: { cookie } });
  const csrf = /name="csrf" value="([^"]+)"/.exec(page.body)?.[1];
  expect(csrf, page.body.slice(0, 300)).toBeTruthy();
  return { cookie, csrf: csrf! };
}

describe('route permissions', () => {
  it('every admin route declares a permission, and each role is let in exactly where it holds it', async () => {
    const p = await plane();
    const tokens = await tokensByRole(p);
    // Logging out ends the session the rest of the walk uses: last.
    const routes = p.adminGuard
      .routes()
      .filter((r) => r.access !== 'public')
      .sort((a, b) => Number(a.url === '/logout') - Number(b.url === '/logout'));
    expect(routes.length).toBeGreaterThan(30);

    const sessions = {} as Record<Role, { cookie: string; csrf: string }>;
    for (const role of ROLES) sessions[role] = await signIn(p, tokens[role]);

    const wrong: string[] = [];
    for (const route of routes) {
      for (const role of ROLES) {
        const reads = route.method === 'GET' || route.method === 'HEAD';
        // The dashboard's routes are walked as a browser uses them: a session, and a form with its CSRF token.
        const res =
          route.access === 'session'
            ? await p.adminApp.inject({
                method: route.method as 'GET',
                url: concrete(route.url),
                headers: { cookie: sessions[role].cookie, 'content-type': 'application/x-www-form-urlencoded' },
                ...(reads ? {} : { payload: `csrf=${encodeURIComponent(sessions[role].csrf)}` }),
              })
            : await p.adminApp.inject({
                method: route.method as 'GET',
                url: concrete(route.url),
                headers: { authorization: `Bearer ${tokens[role]}`, 'content-type': 'application/json' },
                ...(reads ? {} : { payload: '{}' }),
              });
        const what = `${role} ${route.method} ${route.url} (needs ${route.permission}) answered ${res.statusCode}`;
        if (allows(role, route.permission)) {
          const toLogin = res.statusCode === 303 && String(res.headers.location).startsWith('/login');
          if (res.statusCode === 401 || res.statusCode === 403 || (toLogin && route.url !== '/logout'))
            wrong.push(`${what}: ${res.body.slice(0, 200)}`);
        } else if (res.statusCode !== 403) {
          wrong.push(`${what}, want 403`);
        } else if (route.method !== 'HEAD') {
          // The API answers {"error": …}; the dashboard a page with the same sentence.
          const said = route.access === 'admin' ? res.json<{ error: string }>().error : res.body;
          if (
            !said.includes(`permission "${route.permission}"`) &&
            !said.includes(`permission &quot;${route.permission}&quot;`)
          )
            wrong.push(`${what}: ${said.slice(0, 200)} names no permission`);
        }
      }
    }
    expect(wrong).toEqual([]);
    const undeclared = routes.filter((r) => !r.declared).map((r) => `${r.method} ${r.url}`);
    expect(undeclared, 'these routes declare no permission (add needs(...) to their options)').toEqual([]);
  });

  it('keeps a route added later without a permission admin-only, and lists it as undeclared', async () => {
    const p = await plane();
    // Registered after the control plane was built, by "someone else", with no thought of permissions.
    p.adminApp.get('/api/v1/added-later', async () => ({ secret: true }));
    const tokens = await tokensByRole(p);
    const added = p.adminGuard.routes().find((r) => r.url === '/api/v1/added-later' && r.method === 'GET');
    expect(added).toMatchObject({ permission: 'admin', declared: false });
    const get = (token: string) =>
      p.adminApp.inject({ method: 'GET', url: '/api/v1/added-later', headers: { authorization: `Bearer ${token}` } });
    expect((await get(TOKEN)).statusCode).toBe(200);
    expect((await get(tokens.admin)).statusCode).toBe(200);
    for (const role of ['operator', 'viewer', 'team-admin'] as const) {
      const res = await get(tokens[role]);
      expect(res.statusCode).toBe(403);
      expect(res.json()).toEqual({
        error: `${role}-1 (role ${role}) may not GET /api/v1/added-later: it needs the permission "admin", which roles admin hold`,
      });
    }
  });

  // Guards against a team-admin reading the names, limits and weights of teams it does not administer.
  it("lists only a team-admin's own teams, and every team to a viewer", async () => {
    const p = await plane();
    const admin = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
    const made = await p.adminApp.inject({
      method: 'POST',
      url: '/api/v1/teams',
      headers: admin,
      payload: { name: 'ml' },
    });
    expect(made.statusCode, made.body).toBe(201);
    const tokens = await tokensByRole(p);
    const names = async (token: string) => {
      const res = await p.adminApp.inject({
        method: 'GET',
        url: '/api/v1/teams',
        headers: { authorization: `Bearer ${token}` },
      });
      expect(res.statusCode, res.body).toBe(200);
      return res
        .json<{ teams: { name: string }[] }>()
        .teams.map((t) => t.name)
        .sort();
    };
    expect(await names(tokens['team-admin'])).toEqual(['default']);
    expect(await names(tokens.viewer)).toEqual(['default', 'ml']);
  });

  it('refuses to register a route that names no known permission', async () => {
    const p = await plane();
    expect(() => p.adminApp.get('/api/v1/typo', { config: { permission: 'fleet.raed' } }, async () => ({}))).toThrow(
      /declares permission "fleet.raed", which is no permission/,
    );
  });
});
