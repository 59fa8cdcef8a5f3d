// What each node did at its last collect, read back from audit entries.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type AuditEntry, Store } from '../store/index.js';
import { lastCollects, readLastCollects } from './last-collect.js';

const entry = (id: number, at: number, nodes: unknown[], action = 'weights.collect'): AuditEntry => ({
  id,
  at,
  actor: 'admin-token',
  actorLabel: 'tidy-up',
  action,
  target: '*',
  detail: { asked: 1, nodes },
});

describe('last collect per node', () => {
  it('keeps the newest collect that asked each node, with its refusals and unreachable cause', () => {
    const newest = entry(3, 3000, [
      { node: 'n2', removed: [], refused: [{ path: '/c/x', check: 'in_use', reason: '/c/x is in use by shard s1' }] },
    ]);
    const older = entry(1, 1000, [
      { node: 'n1', removed: ['/c/a'], refused: [] },
      { node: 'n2', removed: ['/c/old'], refused: [] },
      {
        node: 'n3',
        removed: [],
        refused: [],
        unreachable: 'cannot reach the node at 127.0.0.1:1: connect ECONNREFUSED',
      },
    ]);
    const other = entry(2, 2000, [{ node: 'n1', removed: ['/c/never'] }], 'models.add');
    const got = lastCollects([newest, other, older]);
    expect(got.map((n) => n.node)).toEqual(['n1', 'n2', 'n3']);
    expect(got[0]).toEqual({
      node: 'n1',
      at: new Date(1000).toISOString(),
      actor: 'admin-token (tidy-up)',
      removed: ['/c/a'],
      refused: [],
    });
    expect(got[1]!.refused, 'the newer collect wins for n2').toEqual([
      { path: '/c/x', check: 'in_use', reason: '/c/x is in use by shard s1' },
    ]);
    expect(got[2]!.unreachable).toMatch(/ECONNREFUSED/);
  });

  it('skips detail of an unexpected shape instead of failing', () => {
    expect(lastCollects([entry(1, 1, [null, 7, { node: 5 }, { node: 'n1', removed: 'x', refused: 'y' }])])).toEqual([
      { node: 'n1', at: new Date(1).toISOString(), actor: 'admin-token (tidy-up)', removed: [], refused: [] },
    ]);
  });

  it('still finds the last collect in a real store after more than a thousand other writes', async () => {
    // Regression: the newest thousand rows of every kind were read and then filtered, so joins and
    // cordons since the collect pushed it out and the answer went silently empty.
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-last-collect-'));
    let at = 1_000;
    const store = await Store.open({ location: { kind: 'sqlite', path: join(dir, 'llmgw.db') }, now: () => at++ });
    try {
      const actor = { identity: 'admin-token', label: null };
      await store.audit.append({
        actor,
        action: 'weights.collect',
        target: '*',
        detail: { asked: 1, nodes: [{ node: 'n1', removed: ['/c/a'], refused: [] }] },
      });
      for (let i = 0; i < 1_100; i++)
        await store.audit.append({
          actor: { identity: `node:n${i}`, label: null },
          action: 'node.join',
          target: `n${i}`,
        });
      expect((await readLastCollects(store))?.map((n) => [n.node, n.removed])).toEqual([['n1', ['/c/a']]]);
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
