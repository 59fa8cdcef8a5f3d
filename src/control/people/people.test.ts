// A person's token from making to deleting, through the admin API. Guards
// against a rotated, expired or deleted person's token still opening the
// admin listener, against the store keeping a token it could give back,
// and against an audit row that names the token instead of the person.
import { describe, expect, it } from 'vitest';
import { inProcessPlanes } from '../../../test/support/control-plane.js';
import { tokenHash } from './people.js';

const TOKEN = 'admin-token-for-tests-0123456789';
const plane = inProcessPlanes({ admin_token: TOKEN });

describe('people', () => {
  it('makes, rotates, expires and deletes a person; only the live token works; the audit names them', async () => {
    const p = await plane();
    const call = (method: 'GET' | 'POST' | 'DELETE', url: string, token = TOKEN, payload?: object) =>
      p.adminApp.inject({
        method,
        url,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        ...(method === 'POST' ? { payload: payload ?? {} } : {}),
      });
    const made = await call('POST', '/api/v1/people', TOKEN, { name: 'alice', role: 'operator' });
    expect(made.statusCode, made.body).toBe(201);
    const first = made.json<{ token: string }>().token;
    expect(first).toMatch(/^llmgw-p-/);
    expect((await call('GET', '/api/v1/whoami', first)).json()).toMatchObject({ person: 'alice', role: 'operator' });
    // The store holds the hash, never the token.
    const rows = await p.store!.connection.db.selectFrom('person_tokens').selectAll().execute();
    expect(rows.map((r) => r.hash)).toEqual([tokenHash(first)]);
    expect(JSON.stringify(rows)).not.toContain(first);

    expect((await call('POST', '/api/v1/people', TOKEN, { name: 'alice', role: 'viewer' })).statusCode).toBe(409);
    expect((await call('POST', '/api/v1/people', TOKEN, { name: 'bob', role: 'team-admin' })).statusCode).toBe(400);

    const rotated = await call('POST', '/api/v1/people/alice/rotate', TOKEN, { expires_in: '1h' });
    const second = rotated.json<{ token: string }>().token;
    expect((await call('GET', '/api/v1/whoami', first)).statusCode, 'the old token ended').toBe(401);
    expect((await call('GET', '/api/v1/whoami', second)).statusCode).toBe(200);
    // An operator manages no people.
    expect((await call('POST', '/api/v1/people', second, { name: 'eve', role: 'admin' })).statusCode).toBe(403);

    expect((await call('POST', '/api/v1/people/alice/expire')).json()).toEqual({ name: 'alice', tokens_expired: 1 });
    expect((await call('GET', '/api/v1/whoami', second)).statusCode).toBe(401);
    const third = (await call('POST', '/api/v1/people/alice/rotate')).json<{ token: string }>().token;
    expect((await call('DELETE', '/api/v1/people/alice')).statusCode).toBe(200);
    expect((await call('GET', '/api/v1/whoami', third)).statusCode, 'deleted with her tokens').toBe(401);

    const audit = (await call('GET', '/api/v1/audit?action=person.')).json<{ entries: { action: string }[] }>();
    expect(audit.entries.map((e) => e.action).reverse()).toEqual([
      'person.create',
      'person.token',
      'person.rotate',
      'person.expire',
      'person.rotate',
      'person.delete',
    ]);
  });
});
