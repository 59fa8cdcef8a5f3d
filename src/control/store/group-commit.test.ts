// Joins that arrive together on SQLite share one transaction (one fsync).
// The failure this guards against: a join storm of 10,000 nodes after a
// restart, held to one fsync per join, took minutes; and a grouped write that
// fails must not take the others in its group down with it.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Store } from './index.js';

const audit = { actor: 'test', action: 'node.join', target: 'x', detail: {} };
const joinOf = (id: string, expectCredentialHash?: string | null) => ({
  id,
  hostname: id,
  mgmtAddr: null,
  labels: {},
  credentialHash: 'a'.repeat(64),
  mgmtNonce: 'n',
  mgmtTokenHash: 'b'.repeat(64),
  approvalIfNew: 'approved',
  agentVersion: '1.0.0',
  protocolVersion: 1,
  ...(expectCredentialHash !== undefined ? { expectCredentialHash } : {}),
});

describe('group commit of joins on SQLite', () => {
  it('writes many concurrent joins, and a join that lost its race fails alone', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-group-commit-'));
    const store = await Store.open({ location: { kind: 'sqlite', path: join(dir, 'db') } });
    try {
      await store.nodes.upsertOnJoin(joinOf('taken'), audit);
      const ids = Array.from({ length: 200 }, (_, i) => `n${i}`);
      const results = await Promise.allSettled([
        ...ids.map((id) => store.nodes.upsertOnJoin(joinOf(id), audit)),
        // Decided on "nobody holds it", but a member does: refused, as a race lost.
        store.nodes.upsertOnJoin(joinOf('taken', null), audit),
      ]);
      const refused = results.filter((r) => r.status === 'rejected');
      expect(refused, 'only the join that lost its race is refused').toHaveLength(1);
      expect(String((refused[0] as PromiseRejectedResult).reason)).toMatch(/taken by another join/);
      const rows = await store.nodes.list();
      expect(rows.map((r) => r.id).sort(), 'every other join is written').toEqual([...ids, 'taken'].sort());
      const audits = await store.audit.list({ limit: 1000 });
      expect(audits.length, 'each written join has its audit row, and the refused one none').toBe(201);
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
