// GET /api/v1/events through a whole control plane (no listener: inject):
// the reconciler's decisions arrive in the log and come back in the wire
// shape of src/api/types.ts, newest first, filtered as asked. Also the
// admin routes' declared queries, which the same control plane shows.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { EventsView } from '../../api/types.js';
import { compileControlOptions } from '../config/index.js';
import { ControlPlane } from '../control-plane.js';

const TOKEN = 'admin-token-for-tests-0123456789';
const auth = { authorization: `Bearer ${TOKEN}` };
const planes: ControlPlane[] = [];
afterEach(async () => {
  await Promise.all(planes.splice(0).map((p) => p.close()));
});

/** A control plane on a SQLite file of its own, closed after the test. */
async function plane(): Promise<ControlPlane> {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-events-api-'));
  const p = await ControlPlane.create(
    compileControlOptions({ store: `sqlite:${join(dir, 'db')}`, admin_token: TOKEN }),
    { logger: pino({ level: 'silent' }) },
  );
  planes.push(p);
  return p;
}

describe('GET /api/v1/events', () => {
  it("shows a pass's scaling decision and placement failure, newest first, by model, after an id, and refuses a bad limit", async () => {
    const p = await plane();
    const added = await p.adminApp.inject({
      method: 'POST',
      url: '/api/v1/models?force=true',
      headers: auth,
      payload: { name: 'demo', source: 'hf://org/demo', profiles: [{ engine: 'sim' }] },
    });
    expect(added.statusCode, added.body).toBe(200);
    await p.reconciler.pass();
    p.events.record({ kind: 'node_joined', node: 'n1', message: 'node n1 joined' });

    const all = (await p.adminApp.inject({ method: 'GET', url: '/api/v1/events', headers: auth })).json<EventsView>();
    expect(all.events.map((e) => e.kind)).toEqual(['node_joined', 'placement_failed', 'scale']);
    const [joined, failed, scaled] = all.events;
    expect(joined).toEqual({
      id: expect.any(Number),
      at: expect.stringMatching(/^\d{4}-\d\d-\d\dT.*Z$/),
      kind: 'node_joined',
      node: 'n1',
      message: 'node n1 joined',
    });
    expect(scaled).toMatchObject({
      model: 'demo',
      from: 0,
      to: 1,
      message: 'demo: 0 → 1 replica(s): scaling.min is 1',
    });
    expect(failed).toMatchObject({ model: 'demo', message: expect.stringContaining('cannot be placed') });

    const byModel = (
      await p.adminApp.inject({ method: 'GET', url: '/api/v1/events?model=demo&limit=1', headers: auth })
    ).json<EventsView>();
    expect(byModel.events.map((e) => e.kind)).toEqual(['placement_failed']);
    const after = (
      await p.adminApp.inject({ method: 'GET', url: `/api/v1/events?after=${failed!.id}`, headers: auth })
    ).json<EventsView>();
    expect(after.events.map((e) => e.kind)).toEqual(['node_joined']);

    const bad = await p.adminApp.inject({ method: 'GET', url: '/api/v1/events?limit=0', headers: auth });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toEqual({ error: 'limit must be a whole number from 1 to 1000; got "0"' });
    expect(
      (await p.adminApp.inject({ method: 'GET', url: '/api/v1/events' })).statusCode,
      'the admin token is required',
    ).toBe(401);
  });
});

describe("the admin API's declared queries", () => {
  it('answers a query its route does not declare (a field given twice) with 400 naming it', async () => {
    const p = await plane();
    for (const [url, field] of [
      ['/api/v1/events?model=a&model=b', 'model'],
      ['/api/v1/requests?limit=1&limit=2', 'limit'],
      ['/api/v1/audit?actor=a&actor=b', 'actor'],
      ['/api/v1/replicas?model=a&model=b', 'model'],
      ['/api/v1/weights/orphans?node=a&node=b', 'node'],
    ] as const) {
      const res = await p.adminApp.inject({ method: 'GET', url, headers: auth });
      expect(res.statusCode, url).toBe(400);
      expect(res.json<{ error: string }>().error, url).toMatch(new RegExp(`^${field}: .*received array`));
      const anonymous = await p.adminApp.inject({ method: 'GET', url });
      expect(anonymous.statusCode, `${url} without the token: refused before its query is read`).toBe(401);
    }
  });
});
