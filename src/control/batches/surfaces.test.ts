// The admin cancel goes through the client listener's cancel, which checks
// the caller owns the batch: the caller made from a batch's row must own it,
// or an operator's cancel would answer "no such batch".
import { describe, expect, it } from 'vitest';
import { ownerOf } from './service.js';
import { callerOf } from './surfaces.js';

describe('callerOf', () => {
  for (const owner of ['team:ml', 'key:k-123', 'anonymous']) {
    it(`makes a caller who owns a batch of ${owner}`, () => {
      expect(ownerOf(callerOf({ owner, key_id: 'k-123' }))).toBe(owner);
    });
  }
});
