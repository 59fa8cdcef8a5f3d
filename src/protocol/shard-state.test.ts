// The shard state as the wire carries it. Guards two failures: a state one
// side adds that the other side's list lacks (the lists were three copies),
// and a newer agent's state refusing the whole heartbeat, which would make
// its node look silent and have its replicas replaced.
import { describe, expect, it } from 'vitest';
import { HeartbeatRequestSchema, ReadShardStateSchema, SHARD_STATES, ShardStateSchema } from './index.js';

describe('shard state on the wire', () => {
  it('reads every known state as itself', () => {
    for (const state of SHARD_STATES) expect(ReadShardStateSchema.parse(state)).toBe(state);
    expect(ShardStateSchema.options).toEqual([...SHARD_STATES]);
  });

  it("reads a state it does not know as 'unknown', and still refuses one that is not a string", () => {
    expect(ReadShardStateSchema.parse('hibernating')).toBe('unknown');
    const beat = HeartbeatRequestSchema.parse({
      node_id: 'n1',
      shards: [{ shard_id: 's1', replica_id: 'r1', state: 'hibernating' }],
    });
    expect(beat.shards?.[0]?.state).toBe('unknown');
    expect(ReadShardStateSchema.safeParse(7).success).toBe(false);
  });
});
