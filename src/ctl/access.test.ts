import { describe, expect, it } from 'vitest';
import { KeyFlagError, newKeyFrom, newLines } from './access.js';

describe('logs -f: the new part of a tail', () => {
  it('prints only what follows the lines already shown', () => {
    expect(newLines(['a', 'b', 'c'], ['b', 'c', 'd', 'e'])).toEqual(['d', 'e']);
    expect(newLines(['a', 'b', 'c'], ['a', 'b', 'c'])).toEqual([]);
    expect(newLines([], ['x'])).toEqual(['x']);
  });

  it('prints the whole tail when nothing overlaps (rotated, or more than a window written)', () => {
    expect(newLines(['a', 'b'], ['x', 'y'])).toEqual(['x', 'y']);
  });

  it('prefers the longest overlap, so a repeated line is not printed twice', () => {
    expect(newLines(['x', 'y', 'x'], ['x', 'y', 'x', 'z'])).toEqual(['z']);
  });
});

describe('keys create: flags to a request', () => {
  const now = Date.parse('2026-12-02T00:00:00Z');

  it('reads models, limits and a relative or absolute expiry', () => {
    expect(newKeyFrom('bot', { models: 'a, b', rpm: '60', tpm: '1000', expires: '30d' }, now)).toEqual({
      name: 'bot',
      allowed_models: ['a', 'b'],
      requests_per_minute: 60,
      tokens_per_minute: 1000,
      expires_at: '2027-01-01T00:00:00.000Z',
    });
    expect(newKeyFrom('bot', { expires: '2027-05-01T00:00:00Z' }, now).expires_at).toBe('2027-05-01T00:00:00Z');
    expect(newKeyFrom('bot', {}, now)).toEqual({ name: 'bot' });
  });

  it('names the flag that is wrong', () => {
    expect(() => newKeyFrom('bot', { rpm: '0' }, now)).toThrow(
      new KeyFlagError('--rpm: "0" is not a whole number of 1 or more'),
    );
    expect(() => newKeyFrom('bot', { models: ' , ' }, now)).toThrow(/--models/);
    expect(() => newKeyFrom('bot', { expires: 'soon' }, now)).toThrow(/--expires: "soon"/);
  });
});
