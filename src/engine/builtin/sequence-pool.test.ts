// The pool that hands out the builtin engine's sequences, without a model:
// who gets a sequence, who waits, who is refused, and that a waiter whose
// client left gives its place up at once.
import { describe, expect, it } from 'vitest';
import { BUSY_RETRY_AFTER_SECONDS, SequencePool } from './llama-runtime.js';

const live = () => new AbortController().signal;

describe('SequencePool', () => {
  it('hands out free sequences, queues the next in arrival order up to the bound, then refuses with Retry-After', async () => {
    const pool = new SequencePool(['a', 'b'], 2);
    expect(await pool.acquire(live())).toBe('a');
    expect(await pool.acquire(live())).toBe('b');
    expect([...pool.inUse]).toEqual(['a', 'b']);
    const first = pool.acquire(live());
    const second = pool.acquire(live());
    expect(pool.waiting).toBe(2);
    await expect(pool.acquire(live())).rejects.toMatchObject({
      code: 'LLMGW_ENGINE_BUSY',
      status: 429,
      context: { retryAfterSeconds: BUSY_RETRY_AFTER_SECONDS },
      message: expect.stringContaining('--max-queue 2'),
    });
    pool.release('b');
    expect(await first).toBe('b');
    pool.release('a');
    expect(await second).toBe('a');
    expect(pool.waiting).toBe(0);
    pool.release('a');
    pool.release('b');
    expect(pool.inUse.size).toBe(0);
  });

  it('with a bound of 0 refuses as soon as every sequence is busy', async () => {
    const pool = new SequencePool(['only'], 0);
    await pool.acquire(live());
    await expect(pool.acquire(live())).rejects.toMatchObject({ code: 'LLMGW_ENGINE_BUSY' });
  });

  it('drops a waiter whose client went away, so its place and the next sequence go to others', async () => {
    const pool = new SequencePool(['only'], 1);
    await pool.acquire(live());
    const gone = new AbortController();
    const abandoned = pool.acquire(gone.signal);
    gone.abort(new Error('the client went away'));
    await expect(abandoned).rejects.toThrow('the client went away');
    expect(pool.waiting).toBe(0);
    const next = pool.acquire(live());
    pool.release('only');
    expect(await next).toBe('only');
  });

  it('refuses a request whose client already left without taking a sequence', async () => {
    const pool = new SequencePool(['only'], 1);
    const gone = new AbortController();
    gone.abort(new Error('gone'));
    await expect(pool.acquire(gone.signal)).rejects.toThrow('gone');
    expect(await pool.acquire(live())).toBe('only');
  });

  it('gives a prompt the free sequence holding its longest prefix when that is half of it or more, else the least recently used', async () => {
    const held = new Map<string, number[]>([
      ['a', [1, 2, 3, 9, 9]],
      ['b', [1, 2, 7]],
      ['c', [4]],
    ]);
    const pool = new SequencePool(['a', 'b', 'c'], 0, (s) => held.get(s) ?? []);
    expect(await pool.acquire(live(), [1, 2, 7, 8])).toBe('b');
    expect(await pool.acquire(live(), [1, 2, 3, 4])).toBe('a');
    pool.release('b');
    pool.release('a');
    // Both share [1, 2], half of the prompt: the one used longer ago of the two.
    expect(await pool.acquire(live(), [1, 2, 5, 6])).toBe('b');
    pool.release('b');
    // Sharing less than half, or no prompt: the least recently used, whatever it holds.
    expect(await pool.acquire(live(), [1, 5, 6])).toBe('c');
    expect(await pool.acquire(live())).toBe('a');
    expect(await pool.acquire(live(), [4])).toBe('b');
  });

  it('hands a freed sequence to the waiter that came first, whatever its prompt', async () => {
    const pool = new SequencePool(['a'], 2, (s) => (s === 'a' ? [1, 2] : []));
    await pool.acquire(live(), [1, 2]);
    const first = pool.acquire(live(), [5]);
    const second = pool.acquire(live(), [1, 2]);
    pool.release('a');
    expect(await first).toBe('a');
    pool.release('a');
    expect(await second).toBe('a');
  });
});
