// The teams, budgets and spend pages through a real control plane (in this
// process, SQLite): a viewer reads every team's, a team-admin only its own.
// Guards against a team-admin's page showing another team's budgets or
// keys (the API cuts them; a page that read the book directly would not),
// and against a budget page without its used/limit and reset time.
import { describe, expect, it } from 'vitest';
import { inProcessPlanes } from '../../../test/support/control-plane.js';
import { gpuHours } from './pages/money.js';

const TOKEN = 'admin-token-for-money-pages-0123456789';
const plane = inProcessPlanes({ admin_token: TOKEN });
const json = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };

type Plane = Awaited<ReturnType<typeof plane>>;

async function post(p: Plane, url: string, payload: unknown): Promise<{ [k: string]: unknown }> {
  const res = await p.adminApp.inject({ method: 'POST', url, headers: json, payload: payload as object });
  expect(res.statusCode, res.body).toBeLessThan(300);
  return res.json();
}

async function sessionOf(p: Plane, token: string): Promise<string> {
  const login = await p.adminApp.inject({
    method: 'POST',
    url: '/login',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams({ token }).toString(),
  });
  expect(login.statusCode, login.body).toBe(303);
  return String(login.headers['set-cookie']).split(';')[0]!;
}

describe('teams, budgets and spend pages', () => {
  it("show a viewer every team's, and a team-admin its own teams' only", async () => {
    const p = await plane();
    for (const team of ['ml', 'web']) {
      await post(p, '/api/v1/teams', { name: team, requests_per_minute: 60 });
      const key = await post(p, '/api/v1/keys', { name: `${team}-ci`, team });
      await post(p, '/api/v1/budgets', { scope: 'team', subject: team, unit: 'usd', period: 'month', amount: 100 });
      await post(p, '/api/v1/budgets', { scope: 'key', subject: key.id, unit: 'tokens', period: 'day', amount: 5000 });
    }
    const viewer = (await post(p, '/api/v1/people', { name: 'vera', role: 'viewer' })).token as string;
    const lead = (await post(p, '/api/v1/people', { name: 'tom', role: 'team-admin', teams: ['ml'] })).token as string;
    const get = async (token: string, url: string) => {
      const res = await p.adminApp.inject({ method: 'GET', url, headers: { cookie: await sessionOf(p, token) } });
      expect(res.statusCode, res.body.slice(0, 300)).toBe(200);
      return res.body;
    };

    const teams = await get(viewer, '/teams');
    for (const t of ['ml', 'web', 'default']) expect(teams).toContain(`data-team="${t}"`);
    const budgets = await get(viewer, '/budgets');
    expect(budgets.match(/data-budget="/g)).toHaveLength(4);
    // Used of the limit, per period, and when the period ends (UTC midnight or the month's first).
    expect(budgets).toContain('$0.00 of $100.00 per month (0%)');
    expect(budgets).toContain('0 tokens of 5,000 tokens per day (0%)');
    expect(budgets).toMatch(/data-field="resets">\d{4}-\d\d-\d\dT00:00:00.000Z</);

    const own = await get(lead, '/budgets');
    expect(own.match(/data-budget="/g), 'the team budget of ml and the budget of its key').toHaveLength(2);
    expect(own).toContain('team ml');
    expect(own).not.toContain('team web');
    expect(own).toContain('Shown for your teams only: ml.');
    const ownTeams = await get(lead, '/teams');
    expect(ownTeams).toContain('data-team="ml"');
    expect(ownTeams).not.toContain('data-team="web"');
    expect(await get(lead, '/spend')).toContain('Spend per model, and what a million tokens cost');
  });
});

// Guards against a replica placed seconds ago showing 0.00 GPU-hours beside a cost that is not 0.
describe('GPU-hours as the spend page prints them', () => {
  it('keeps two places, and two significant digits under a hundredth', () => {
    expect(gpuHours(0)).toBe('0.00');
    expect(gpuHours(12.345)).toBe('12.35');
    expect(gpuHours(5 / 3600)).toBe('0.0014');
    expect(Number(gpuHours(1 / 3600))).toBeGreaterThan(0);
  });
});
