// The assignment board's contract: a node's generation moves only when what
// it should run changed (a needless move answers every held heartbeat of the
// fleet at each pass, a missed one leaves an agent running the old set until
// its next poll), and a held wait ends, and lets go of what it registered,
// however it ends.
import { describe, expect, it } from 'vitest';
import type { ShardAssignment } from '../../protocol/index.js';
import { AssignmentBoard } from './assignments.js';

const shard = (id: string, gpus: number[] = [0]): ShardAssignment => ({
  shard_id: id,
  replica_id: `rep-${id}`,
  model: 'm',
  aliases: [],
  source: 'hf://org/m',
  profile: { name: 'p', engine: 'sim', gpus: gpus.length, shards: 1, args: [], env: {} },
  rank: 0,
  gpu_indices: gpus,
  peers: [],
});

describe('assignment board', () => {
  it('moves the generation on a real change only, whatever objects carry the lists', () => {
    const board = new AssignmentBoard(100);
    const steps: [string, ShardAssignment[], boolean][] = [
      ['nothing, as before', [], false],
      ['a first shard', [shard('a')], true],
      ['the same shard, built afresh', [shard('a')], false],
      ['the same shard again', [shard('a')], false],
      ['one shard for another of the same count', [shard('b')], true],
      ['that shard again, built afresh', [shard('b')], false],
      ['a shard whose GPUs changed', [shard('b', [1])], true],
      ['a second shard', [shard('b', [1]), shard('c')], true],
      ['both again, built afresh', [shard('b', [1]), shard('c')], false],
      ['nothing', [], true],
      ['nothing again', [], false],
    ];
    let generation = board.get('n1').generation;
    for (const [what, shards, moves] of steps) {
      board.set('n1', shards);
      const now = board.get('n1');
      expect(now.generation, `${what}: ${moves ? 'a change moves the generation' : 'no change leaves it'}`).toBe(
        moves ? generation + 1 : generation,
      );
      expect(now.shards, what).toEqual(shards);
      generation = now.generation;
    }
  });

  it('does not call the cancel hook when there is nothing to wait for', async () => {
    const board = new AssignmentBoard(100);
    let registered = 0;
    const hook = () => {
      registered++;
      return () => {};
    };
    await board.waitForChange('n1', 99, 60_000, hook);
    await board.waitForChange('n1', 100, 0, hook);
    expect(registered, 'an outdated generation and a zero wait answer at once').toBe(0);
  });

  it('ends a wait when cancelled, on a change and when its time runs out, undoing the registration each time', async () => {
    const board = new AssignmentBoard(100);
    const ends: string[] = [];
    const wait = (name: string, waitMs: number, cancelNow = false) => {
      let cancel: (() => void) | undefined;
      const ended = board.waitForChange('n1', board.get('n1').generation, waitMs, (c) => {
        cancel = c;
        if (cancelNow) c();
        return () => ends.push(name);
      });
      return { ended, cancel: () => cancel?.() };
    };

    const cancelled = wait('cancelled', 60_000);
    cancelled.cancel();
    await cancelled.ended;
    cancelled.cancel();
    expect(ends, 'a cancel ends the wait and undoes the registration once, a second cancel does nothing').toEqual([
      'cancelled',
    ]);

    const already = wait('cancelled while registering', 60_000, true);
    await already.ended;
    expect(ends.at(-1), 'what it waits on had already ended').toBe('cancelled while registering');

    const changed = wait('changed', 60_000);
    board.bump('n1');
    await changed.ended;
    expect(ends.at(-1)).toBe('changed');

    const timedOut = wait('timed out', 5);
    await timedOut.ended;
    expect(ends, 'each wait undid its registration exactly once').toEqual([
      'cancelled',
      'cancelled while registering',
      'changed',
      'timed out',
    ]);
  });

  it('ends every timed wait, none before its time, and a wait cancelled early leaves the others to run out', async () => {
    const board = new AssignmentBoard(100);
    const startedAt = Date.now();
    const lengths = [0, 1, 30, 120, 250, 250];
    const ended: number[] = [];
    const waits = lengths.map((ms, i) =>
      board
        .waitForChange(`n${i}`, board.get(`n${i}`).generation, ms)
        .then(() => ended.push(Date.now() - startedAt >= ms ? ms : -ms)),
    );
    let cancel: () => void = () => undefined;
    const early = board.waitForChange('n-early', board.get('n-early').generation, 250, (c) => {
      cancel = c;
      return () => undefined;
    });
    cancel();
    await early;
    await Promise.all(waits);
    expect(
      ended.sort((a, b) => a - b),
      'each ran its time out, none sooner',
    ).toEqual([0, 1, 30, 120, 250, 250]);
  });
});
