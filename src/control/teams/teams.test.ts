import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createJsonApp } from '../../http/index.js';
import { hashKey, MemoryKeyStore, registerKeyAdmin } from '../keys/index.js';
import type { ApiKeyRecord } from '../../gateway/ports/index.js';
import {
  checkKeyTeam,
  excessOver,
  MemoryTeams,
  narrowKey,
  registerTeamAdmin,
  TeamKeys,
  type TeamRecord,
} from './index.js';

const canonical = (m: string) => ({ alpha: 'alpha', a: 'alpha', beta: 'beta', gamma: 'gamma' })[m];
const team = (over: Partial<TeamRecord>): TeamRecord => ({
  name: 'ml',
  allowedModels: null,
  requestsPerMinute: null,
  tokensPerMinute: null,
  createdAtMs: 0,
  createdBy: 't',
  updatedAtMs: 0,
  ...over,
});
const key = (over: Partial<ApiKeyRecord>): ApiKeyRecord => ({
  id: 'key_1',
  name: 'k',
  prefix: 'llmgw-abcdef',
  hash: 'h',
  allowedModels: null,
  requestsPerMinute: null,
  tokensPerMinute: null,
  expiresAtMs: null,
  createdAtMs: 0,
  createdBy: 't',
  revokedAtMs: null,
  team: 'ml',
  ...over,
});

describe('a key narrowed by its team', () => {
  const cases: [string, Partial<TeamRecord>, Partial<ApiKeyRecord>, Partial<ApiKeyRecord>][] = [
    [
      'inherits every limit when it sets none',
      { allowedModels: ['alpha'], requestsPerMinute: 100, tokensPerMinute: 1000 },
      {},
      { allowedModels: ['alpha'], requestsPerMinute: 100, tokensPerMinute: 1000 },
    ],
    [
      'keeps its own lower limits',
      { requestsPerMinute: 100 },
      { requestsPerMinute: 10 },
      { requestsPerMinute: 10, tokensPerMinute: null },
    ],
    [
      'is capped where it asks more (the team narrowed after it was made)',
      { requestsPerMinute: 5, tokensPerMinute: 50 },
      { requestsPerMinute: 10, tokensPerMinute: 500 },
      { requestsPerMinute: 5, tokensPerMinute: 50 },
    ],
    [
      'keeps only the models its team allows, an alias by its model',
      { allowedModels: ['alpha'] },
      { allowedModels: ['a', 'beta'] },
      { allowedModels: ['a'] },
    ],
    [
      'keeps its own list under a team that allows every model',
      {},
      { allowedModels: ['beta'] },
      { allowedModels: ['beta'] },
    ],
  ];
  for (const [name, t, k, want] of cases)
    it(name, () => {
      const out = narrowKey(key(k), team(t), canonical);
      expect(out).toMatchObject(want);
      expect(out.team).toBe('ml');
    });

  it('names each field a new key asks beyond its team, and nothing for one that narrows or inherits', () => {
    const t = team({ allowedModels: ['alpha'], requestsPerMinute: 100, tokensPerMinute: null });
    expect(excessOver({ allowedModels: ['a'], requestsPerMinute: 100, tokensPerMinute: 9999 }, t, canonical)).toEqual(
      [],
    );
    expect(excessOver({ allowedModels: null, requestsPerMinute: null, tokensPerMinute: null }, t, canonical)).toEqual(
      [],
    );
    expect(
      excessOver({ allowedModels: ['alpha', 'beta'], requestsPerMinute: 101, tokensPerMinute: null }, t, canonical),
    ).toEqual([
      'allowed_models: team "ml" allows "alpha", not "beta"',
      'requests_per_minute: 101 is more than team "ml" allows each key (100)',
    ]);
  });
});

describe('team admin routes', () => {
  it('makes a team, refuses a key that widens it with 400, narrows the keys the gateway reads, and guards deletion', async () => {
    const teams = new MemoryTeams();
    const inner = new MemoryKeyStore();
    const keys = new TeamKeys(inner, teams, canonical);
    const audits: string[] = [];
    const app = createJsonApp({ logger: pino({ level: 'silent' }), bodyLimitBytes: 1 << 20 });
    const audit = (_a: unknown, action: string, target: string) => void audits.push(`${action} ${target}`);
    registerTeamAdmin(app, { teams, keys: () => inner.list(), now: () => 1000, audit, canonical });
    registerKeyAdmin(app, {
      keys,
      now: () => 1000,
      audit,
      modelExists: (m) => canonical(m) !== undefined,
      checkTeam: checkKeyTeam(teams, canonical),
    });
    const made = await app.inject({
      method: 'POST',
      url: '/api/v1/teams',
      payload: { name: 'ml', allowed_models: ['a'], requests_per_minute: 60 },
    });
    expect(made.statusCode, made.body).toBe(201);
    expect(made.json(), 'models by their canonical name').toMatchObject({
      name: 'ml',
      allowed_models: ['alpha'],
      keys: 0,
    });
    expect((await app.inject({ method: 'POST', url: '/api/v1/teams', payload: { name: 'ml' } })).statusCode).toBe(409);
    expect((await app.inject({ method: 'POST', url: '/api/v1/teams', payload: { name: 'Bad Name' } })).statusCode).toBe(
      400,
    );

    const wide = await app.inject({
      method: 'POST',
      url: '/api/v1/keys',
      payload: { name: 'x', team: 'ml', allowed_models: ['beta'], requests_per_minute: 61 },
    });
    expect(wide.statusCode).toBe(400);
    expect(wide.json<{ error: string }>().error).toBe(
      'a key may narrow its team\'s limits, never widen them: allowed_models: team "ml" allows "alpha", not "beta"; requests_per_minute: 61 is more than team "ml" allows each key (60)',
    );
    const noTeam = await app.inject({ method: 'POST', url: '/api/v1/keys', payload: { name: 'x', team: 'nope' } });
    expect(noTeam.statusCode).toBe(400);
    expect(noTeam.body).toContain('no team is named \\"nope\\"');

    const ok = await app.inject({ method: 'POST', url: '/api/v1/keys', payload: { name: 'x', team: 'ml' } });
    expect(ok.statusCode, ok.body).toBe(201);
    const { secret, id, team: keyTeam } = ok.json<{ secret: string; id: string; team: string }>();
    expect(keyTeam).toBe('ml');
    const seen = keys.lookupByHash(hashKey(secret)) as ApiKeyRecord;
    expect(seen, "the gateway sees the team's limits on a key that set none").toMatchObject({
      allowedModels: ['alpha'],
      requestsPerMinute: 60,
      team: 'ml',
    });
    const plain = await app.inject({ method: 'POST', url: '/api/v1/keys', payload: { name: 'y' } });
    expect(plain.json(), 'a key made without a team joins default').toMatchObject({ team: 'default' });

    const set = await app.inject({ method: 'POST', url: '/api/v1/teams/ml', payload: { requests_per_minute: 6 } });
    expect(set.statusCode, set.body).toBe(200);
    expect(set.json()).toMatchObject({ requests_per_minute: 6, allowed_models: ['alpha'], keys: 1 });
    expect(
      (keys.lookupByHash(hashKey(secret)) as ApiKeyRecord).requestsPerMinute,
      'a change holds at the next lookup',
    ).toBe(6);

    const held = await app.inject({ method: 'DELETE', url: '/api/v1/teams/ml' });
    expect(held.statusCode).toBe(409);
    expect(held.body).toContain(id);
    expect((await app.inject({ method: 'DELETE', url: '/api/v1/teams/default' })).statusCode).toBe(409);
    await inner.revoke(id, 1000);
    expect((await app.inject({ method: 'DELETE', url: '/api/v1/teams/ml' })).statusCode).toBe(200);
    const listed = await app.inject({ method: 'GET', url: '/api/v1/teams' });
    expect(listed.json<{ teams: { name: string; keys: number }[] }>().teams).toMatchObject([
      { name: 'default', keys: 1 },
    ]);
    expect(audits.filter((a) => a.startsWith('team.'))).toEqual(['team.create ml', 'team.set ml', 'team.delete ml']);
  });
});
