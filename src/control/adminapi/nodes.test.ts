// The membership routes in process: who may remove, approve and hand out
// per-node join tokens, what each answers, and what the audit log keeps.
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { inProcessPlanes } from '../../../test/support/control-plane.js';
import { createJsonApp } from '../../http/index.js';
import { registerNodeIdentityRoutes } from './nodes.js';

const TOKEN = 'admin-token-for-tests-0123456789';
const JOIN = 'join-token-for-tests-0123456789';
const auth = { authorization: `Bearer ${TOKEN}`, 'x-llmgw-actor': 'ops' };
const plane = inProcessPlanes({ admin_token: TOKEN, join_token: JOIN });

const joinBody = (id: string, extra: Record<string, unknown> = {}) => ({ join_token: JOIN, node_id: id, ...extra });

describe('admin API: node membership', () => {
  it('creates a per-node join token once, lists it without its secret, and the agent listener honours it', async () => {
    const p = await plane();
    const bad = await p.adminApp.inject({
      method: 'POST',
      url: '/api/v1/join-tokens',
      headers: auth,
      payload: { node: 'gpu 7' },
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json<{ error: string }>().error).toContain('node: want the node id');
    const tooLong = await p.adminApp.inject({
      method: 'POST',
      url: '/api/v1/join-tokens',
      headers: auth,
      payload: { node: 'gpu-7', expires: '30d' },
    });
    expect(tooLong.json<{ error: string }>().error).toContain('at most 7d');

    const created = await p.adminApp.inject({
      method: 'POST',
      url: '/api/v1/join-tokens',
      headers: auth,
      payload: { node: 'gpu-7', expires: '1h' },
    });
    expect(created.statusCode).toBe(201);
    const { token, id, status } = created.json<{ token: string; id: string; status: string }>();
    expect(status).toBe('unused');
    const listed = await p.adminApp.inject({ method: 'GET', url: '/api/v1/join-tokens', headers: auth });
    expect(listed.body).not.toContain(token);
    expect(listed.json<{ id: string }[]>().map((t) => t.id)).toEqual([id]);

    // The shared join token cannot take gpu-7's id while it is live; the per-node token, an admin's act, can.
    const first = await p.agentApp.inject({ method: 'POST', url: '/agent/v1/join', payload: joinBody('gpu-7') });
    expect(first.statusCode).toBe(200);
    const refused = await p.agentApp.inject({ method: 'POST', url: '/agent/v1/join', payload: joinBody('gpu-7') });
    expect(refused.statusCode).toBe(409);
    const recovered = await p.agentApp.inject({
      method: 'POST',
      url: '/agent/v1/join',
      payload: { join_token: token, node_id: 'gpu-7' },
    });
    expect(recovered.statusCode).toBe(200);
    const audit = await p.store!.audit.list({ target: 'gpu-7' });
    expect(audit.map((a) => a.action)).toEqual(['node.rejoin_with_node_token', 'node.join', 'join_token.create']);
  });

  it('removes a node (refused while it runs replicas unless forced), and approves a pending one', async () => {
    const p = await plane({ join_approval: 'manual' });
    await p.agentApp.inject({ method: 'POST', url: '/agent/v1/join', payload: joinBody('n1') });
    const nodes = await p.adminApp.inject({ method: 'GET', url: '/api/v1/nodes', headers: auth });
    expect(nodes.json<{ id: string; approval?: string }[]>()).toMatchObject([{ id: 'n1', approval: 'pending' }]);
    const summary = await p.adminApp.inject({ method: 'GET', url: '/api/v1/summary', headers: auth });
    expect(summary.json<{ attention: string[] }>().attention.join('\n')).toContain('node n1 waits for approval');

    const approved = await p.adminApp.inject({
      method: 'POST',
      url: '/api/v1/nodes/n1/approve',
      headers: auth,
      payload: {},
    });
    expect(approved.json()).toEqual({ approved: 'n1' });
    expect(p.inventory.get('n1')!.approval).toBe('approved');
    const missing = await p.adminApp.inject({
      method: 'POST',
      url: '/api/v1/nodes/nope/approve',
      headers: auth,
      payload: {},
    });
    expect(missing.statusCode).toBe(404);

    const removed = await p.adminApp.inject({ method: 'DELETE', url: '/api/v1/nodes/n1', headers: auth });
    expect(removed.statusCode).toBe(200);
    expect(removed.json<{ removed: string; replicas: number }>()).toMatchObject({ removed: 'n1', replicas: 0 });
    expect(p.inventory.get('n1')).toBeUndefined();
    const again = await p.adminApp.inject({ method: 'DELETE', url: '/api/v1/nodes/n1', headers: auth });
    expect(again.statusCode).toBe(404);
    const rejoin = await p.agentApp.inject({ method: 'POST', url: '/agent/v1/join', payload: joinBody('n1') });
    expect(rejoin.statusCode, 'a removed id is free').toBe(200);
    expect(p.inventory.get('n1')!.approval, 'and joins as new: pending again').toBe('pending');
    const audit = await p.store!.audit.list({ target: 'n1' });
    // The actor is who proved themselves (the admin token); what they called themselves is only the label.
    expect(audit.map((a) => `${a.action} by ${a.actor} (${a.actorLabel ?? '-'})`)).toEqual([
      'node.join by node:n1 (-)',
      'node.remove by admin-token (ops)',
      'node.approve by admin-token (ops)',
      'node.join by node:n1 (-)',
    ]);
  });
});

describe('admin API built without an inventory', () => {
  // The join-token route answered 501 LLMGW_NO_STORE "has no inventory" here, blaming a store that
  // every real control plane has (store: none included) and sending an operator to fix the wrong thing.
  it('does not mount the join-token routes, so they answer 404 like any unknown path, never LLMGW_NO_STORE', async () => {
    // Built as the admin listener is, whose routes declare their requests in zod.
    const app = createJsonApp({ logger: pino({ level: 'silent' }), bodyLimitBytes: 1 << 20 });
    registerNodeIdentityRoutes(app, {});
    await app.ready();
    try {
      const created = await app.inject({
        method: 'POST',
        url: '/api/v1/join-tokens',
        payload: { node: 'gpu-7', expires: '1h' },
      });
      expect(created.statusCode, created.body).toBe(404);
      expect(created.body, 'no store is blamed').not.toContain('LLMGW_NO_STORE');
      const listed = await app.inject({ method: 'GET', url: '/api/v1/join-tokens' });
      expect(listed.statusCode, listed.body).toBe(404);
    } finally {
      await app.close();
    }
  });
});
