// GET /api/v1/audit in process over a real SQLite store: every admin write
// is listed with who did it and a sentence naming the before and after, and
// the filters (since, actor, action family, limit) narrow it or refuse a bad
// value with a 400 that says what to write.
import { describe, expect, it } from 'vitest';
import type { AuditView } from '../../api/types.js';
import { inProcessPlanes } from '../../../test/support/control-plane.js';
import { auditSummary, sinceMs } from './audit.js';

const TOKEN = 'admin-token-for-tests-0123456789';
const JOIN = 'join-token-for-tests-0123456789';
const plane = inProcessPlanes({ admin_token: TOKEN, join_token: JOIN });
const as = (actor: string) => ({ authorization: `Bearer ${TOKEN}`, 'x-llmgw-actor': actor });

describe('admin API: audit', () => {
  it('lists who changed what, newest first, with the before and after in words', async () => {
    const p = await plane();
    expect(
      (await p.agentApp.inject({ method: 'POST', url: '/agent/v1/join', payload: { join_token: JOIN, node_id: 'n1' } }))
        .statusCode,
    ).toBe(200);
    const add = await p.adminApp.inject({
      method: 'POST',
      url: '/api/v1/models?force=true',
      headers: as('alice'),
      payload: { name: 'm', source: 'hf://org/m', scaling: { min: 0 }, profiles: [{ engine: 'sim' }] },
    });
    expect(add.statusCode, add.body).toBe(200);
    expect(
      (
        await p.adminApp.inject({
          method: 'POST',
          url: '/api/v1/nodes/n1/state',
          headers: as('bob'),
          payload: { state: 'cordon' },
        })
      ).statusCode,
    ).toBe(200);

    const res = await p.adminApp.inject({ method: 'GET', url: '/api/v1/audit', headers: as('carol') });
    expect(res.statusCode).toBe(200);
    const view = res.json<AuditView>();
    expect(view.recorded).toBe(true);
    expect(view.entries.map((e) => `${e.actor_label ?? e.actor} ${e.action} ${e.target}`)).toEqual([
      'bob node.state n1',
      'alice model.add m',
      'node:n1 node.join n1',
    ]);
    expect(view.entries[0]!.actor, 'the identity the request proved, beside the label it chose').toBe('admin-token');
    expect(view.entries[0]!.summary).toBe('cordoned node n1 (was ready)');
    expect(view.entries[1]!.summary).toBe('added model m (source hf://org/m, 1 profile, min 0)');

    const bobs = (
      await p.adminApp.inject({ method: 'GET', url: '/api/v1/audit?actor=bob', headers: as('x') })
    ).json<AuditView>();
    expect(bobs.entries.map((e) => e.action)).toEqual(['node.state']);
    const nodeFamily = (
      await p.adminApp.inject({ method: 'GET', url: '/api/v1/audit?action=node.', headers: as('x') })
    ).json<AuditView>();
    expect(nodeFamily.entries.map((e) => e.action)).toEqual(['node.state', 'node.join']);
    const one = (
      await p.adminApp.inject({ method: 'GET', url: '/api/v1/audit?limit=1&since=1h', headers: as('x') })
    ).json<AuditView>();
    expect(one.entries).toHaveLength(1);
    const bad = await p.adminApp.inject({ method: 'GET', url: '/api/v1/audit?since=yesterday', headers: as('x') });
    expect(bad.statusCode).toBe(400);
    expect(bad.json<{ error: string }>().error).toContain(
      'since must be a duration back from now (90s, 30m, 12h, 7d) or a time',
    );
    const unauthenticated = await p.adminApp.inject({ method: 'GET', url: '/api/v1/audit' });
    expect(unauthenticated.statusCode, 'the audit log is behind the admin token').toBe(401);
  });

  it('says an unknown action as it is, and reads since as a duration or a time', () => {
    expect(auditSummary({ action: 'thing.done', target: 'x', detail: {} })).toBe('thing.done x');
    expect(auditSummary({ action: 'node.state', target: 'n2', detail: { from: 'cordoned', to: 'ready' } })).toBe(
      'made ready (uncordoned) node n2 (was cordoned)',
    );
    expect(
      auditSummary({
        action: 'weights.collect',
        target: '*',
        detail: { asked: 2, removed: 1, refused: 1, bytes_freed: 3 * 2 ** 30 },
      }),
    ).toBe('collected orphaned weights on every node: asked 2, removed 1, refused 1, 3.0 GiB freed');
    expect(sinceMs('30m', 10_000_000)).toBe(10_000_000 - 30 * 60_000);
    expect(sinceMs('2026-12-04T10:00:00Z', 0)).toBe(Date.parse('2026-12-04T10:00:00Z'));
  });
});
