// The admin listener's request bodies and queries, checked by each route's
// zod schema before its handler (the agent listener's are in
// agentapi/bodies.test.ts). Guards the move from checks written in each
// handler (safeParse and throw, casts of request.body) to the route schemas:
// a bad request must still be 400 with the sentence that says what to fix,
// and the admin guard must still answer before any body is looked at.
import { describe, expect, it } from 'vitest';
import { inProcessPlanes } from '../../../test/support/control-plane.js';

const TOKEN = 'admin-token-for-tests-0123456789';
const JOIN = 'join-token-for-tests-0123456789';
const auth = { authorization: `Bearer ${TOKEN}` };
const plane = inProcessPlanes({ admin_token: TOKEN, join_token: JOIN });

const errorOf = (res: { statusCode: number; json: <T>() => T }) => ({
  status: res.statusCode,
  error: res.json<{ error: string }>().error,
});

describe('admin route schemas', () => {
  it('refuses a request without the admin token before its body is checked', async () => {
    const p = await plane();
    const res = await p.adminApp.inject({ method: 'POST', url: '/api/v1/join-tokens', payload: { node: 7 } });
    expect(res.statusCode, 'the guard answers first, so a stranger learns nothing of the schema').toBe(401);
  });

  it('words a model body that is not an object as before, absent or a list', async () => {
    const p = await plane();
    const want = 'the model definition must be a JSON object with at least name, source and profiles';
    const absent = await p.adminApp.inject({ method: 'POST', url: '/api/v1/models', headers: auth });
    expect(errorOf(absent)).toEqual({ status: 400, error: want });
    const list = await p.adminApp.inject({ method: 'POST', url: '/api/v1/models', headers: auth, payload: [{}] });
    expect(errorOf(list)).toEqual({ status: 400, error: want });
    const plan = await p.adminApp.inject({ method: 'POST', url: '/api/v1/models/plan', headers: auth, payload: [] });
    expect(errorOf(plan)).toEqual({ status: 400, error: 'want a model definition, or {"models": [definitions]}' });
  });

  it('names the words a node state takes', async () => {
    const p = await plane();
    const res = await p.adminApp.inject({
      method: 'POST',
      url: '/api/v1/nodes/n1/state',
      headers: auth,
      payload: { state: 'asleep' },
    });
    expect(errorOf(res)).toEqual({
      status: 400,
      error: 'state: unknown state "asleep" (want ready, cordoned or draining; uncordon, cordon and drain also work)',
    });
    const known = await p.adminApp.inject({
      method: 'POST',
      url: '/api/v1/nodes/n1/state',
      headers: auth,
      payload: { state: 'drain' },
    });
    expect(known.statusCode, 'a known word passes the schema and reaches the inventory').toBe(404);
  });

  it('words a join token request field by field', async () => {
    const p = await plane();
    const post = (payload?: unknown) =>
      p.adminApp.inject({
        method: 'POST',
        url: '/api/v1/join-tokens',
        headers: auth,
        ...(payload === undefined ? {} : { payload: payload as object }),
      });
    const node =
      'node: want the node id the token admits (1-128 letters, digits, ".", "_" or "-"), e.g. {"node":"gpu-7","expires":"1h"}';
    expect(errorOf(await post())).toEqual({ status: 400, error: node });
    expect(errorOf(await post({ node: 'gpu-7', expires: 3600 }))).toEqual({
      status: 400,
      error: 'expires: want a duration string like "1h"',
    });
    expect(errorOf(await post({ node: 'gpu-7', expires: 'soon' }))).toEqual({
      status: 400,
      error: 'expires: "soon" is not a duration; write a number with a unit, like 500ms, 90s, 5m or 1h',
    });
    expect(errorOf(await post({ node: 'gpu-7', expires: '8d' }))).toEqual({
      status: 400,
      error: 'expires: want more than 0 and at most 7d (a per-node join token is for setting up one machine); got 8d',
    });
    const made = await post({ node: 'gpu-7' });
    expect(made.statusCode, 'expires is optional').toBe(201);
    const { expires_at, created_at } = made.json<{ expires_at: string; created_at: string }>();
    // Expiry and creation are read from the clock a moment apart: within a minute of 1h is 1h, not 0 or 7d.
    const lifeMs = Date.parse(expires_at) - Date.parse(created_at);
    expect(Math.abs(lifeMs - 3600_000), 'absent expires means 1h').toBeLessThan(60_000);
  });

  it('checks a query where the route checked it before: explain-placement and a replica log', async () => {
    const p = await plane();
    const explain = await p.adminApp.inject({ method: 'GET', url: '/api/v1/explain-placement?model=', headers: auth });
    expect(errorOf(explain)).toEqual({ status: 400, error: 'model is required' });
    const log = await p.adminApp.inject({ method: 'GET', url: '/api/v1/replicas/r1/log?lines=0', headers: auth });
    expect(errorOf(log)).toEqual({ status: 400, error: 'lines: want a whole number from 1 to 10000' });
  });
});
