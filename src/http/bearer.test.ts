import { describe, expect, it } from 'vitest';
import { bearerToken, sameSecret } from './bearer.js';

describe('bearerToken', () => {
  it.each([
    ['Bearer abc', 'abc'],
    ['bearer abc', 'abc'],
    ['BEARER\tabc', 'abc'],
    ['Bearer   abc  ', 'abc'],
    ['Bearer two words', 'two words'],
  ])('reads %j as %j', (header, token) => {
    expect(bearerToken(header)).toBe(token);
  });

  it.each([[undefined], [''], ['Bearer'], ['Bearer '], ['Basic abc'], ['Bearerabc'], ['Token abc']])(
    'finds no token in %j',
    (header) => {
      expect(bearerToken(header)).toBeNull();
    },
  );
});

describe('sameSecret', () => {
  it('tells equal secrets from unequal ones of any length', () => {
    expect(sameSecret('s3cret-token', 's3cret-token')).toBe(true);
    expect(sameSecret('s3cret-token', 's3cret-tokeN')).toBe(false);
    expect(sameSecret('s3cret', 's3cret-token')).toBe(false);
    expect(sameSecret('', 'x')).toBe(false);
  });
});
