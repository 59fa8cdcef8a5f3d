// Which replicas the GPU meter charges for: guards against a stopped shard
// (its engine gone, its GPUs free for the next placement) being priced as if
// it still held them, against the meter and the node views disagreeing on
// what a replica holds, and against a replica losing its id (then its tokens
// could not be priced at its own GPUs' rate).
import { describe, expect, it } from 'vitest';
import { replicaRecord, shardRecord } from '../../../test/support/reconciler-records.js';
import { nodeUsageOf } from '../reconciler/node-usage.js';
import { heldReplicas } from './gpu-wire.js';

const gpus = (nodeId: string) =>
  nodeId === 'n1'
    ? [
        { index: 0, name: 'NVIDIA H100 80GB HBM3', class: 'h100-80gb', problems: [] },
        { index: 1, name: 'NVIDIA H100 80GB HBM3', class: 'h100-80gb', problems: [] },
      ]
    : undefined;

describe('heldReplicas', () => {
  const cases = [
    {
      why: 'a ready replica holds every GPU of its shards, named as its node reports them',
      records: [replicaRecord('r1', { shards: [shardRecord({ gpuIndices: [0, 1] })] })],
      want: [{ id: 'r1', model: 'm', gpus: 2 }],
    },
    {
      why: 'a stopped shard holds nothing; the replica keeps the shards still running',
      records: [
        replicaRecord('r1', {
          state: 'stopping',
          shards: [
            shardRecord({ id: 's0', gpuIndices: [0], state: 'stopped' }),
            shardRecord({ id: 's1', rank: 1, gpuIndices: [1], state: 'ready' }),
          ],
        }),
      ],
      want: [{ id: 'r1', model: 'm', gpus: 1 }],
    },
    {
      why: 'a failed replica has given its GPUs back',
      records: [replicaRecord('r1', { state: 'failed', shards: [shardRecord()] })],
      want: [],
    },
    {
      why: 'a GPU its node does not report is counted, with no name to price it by',
      records: [replicaRecord('r2', { shards: [shardRecord({ nodeId: 'n9', gpuIndices: [3] })] })],
      want: [{ id: 'r2', model: 'm', gpus: 1 }],
    },
  ];
  it.each(cases)('$why', ({ records, want }) => {
    const got = heldReplicas(records, gpus);
    expect(got.map((r) => ({ id: r.id, model: r.model, gpus: r.gpus.length }))).toEqual(want);
    // The node views count the same GPUs as held: one predicate for both.
    const inUse = [...nodeUsageOf(records).values()].reduce((n, u) => n + u.gpusInUse.size, 0);
    expect(got.reduce((n, r) => n + r.gpus.length, 0)).toBe(inUse);
  });

  it('names a reported GPU by its node', () => {
    const [r] = heldReplicas([replicaRecord('r1', { shards: [shardRecord({ gpuIndices: [1] })] })], gpus);
    expect(r?.gpus).toEqual([{ name: 'NVIDIA H100 80GB HBM3', class: 'h100-80gb' }]);
    const [unknown] = heldReplicas([replicaRecord('r2', { shards: [shardRecord({ nodeId: 'n9' })] })], gpus);
    expect(unknown?.gpus).toEqual([{ name: undefined, class: undefined }]);
  });
});
