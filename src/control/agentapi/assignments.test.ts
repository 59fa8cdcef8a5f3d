// The assignment board's contract: a held wait ends, and lets go of what it
// registered, however it ends.
import { describe, expect, it } from 'vitest';
import { AssignmentBoard } from './assignments.js';

describe('assignment board', () => {
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
    expect(ends, 'a cancel ends the wait and undoes the registration once, a second cancel does nothing').toEqual(['cancelled']);

    const already = wait('cancelled while registering', 60_000, true);
    await already.ended;
    expect(ends.at(-1), 'what it waits on had already ended').toBe('cancelled while registering');

    const changed = wait('changed', 60_000);
    board.bump('n1');
    await changed.ended;
    expect(ends.at(-1)).toBe('changed');

    const timedOut = wait('timed out', 5);
    await timedOut.ended;
    expect(ends, 'each wait undid its registration exactly once').toEqual(['cancelled', 'cancelled while registering', 'changed', 'timed out']);
  });
});
