import { describe, expect, it } from 'vitest';
import { KeyFlagError, newKeyFrom } from './access.js';

describe('ctl keys create --priority', () => {
  it('takes a class, and names the flag when it is not one', () => {
    expect(newKeyFrom('bulk', { priority: 'batch' }, 0)).toEqual({ name: 'bulk', priority: 'batch' });
    expect(() => newKeyFrom('bulk', { priority: 'urgent' }, 0)).toThrow(KeyFlagError);
    expect(() => newKeyFrom('bulk', { priority: 'urgent' }, 0)).toThrow(/--priority: want interactive or batch/);
  });
});
