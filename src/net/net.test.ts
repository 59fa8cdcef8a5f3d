import { describe, expect, it } from 'vitest';
import { isLoopbackHost, isWildcardHost } from './index.js';

describe('isWildcardHost', () => {
  it('knows the every-interface binds and nothing else', () => {
    expect(['0.0.0.0', '::', '[::]'].map(isWildcardHost)).toEqual([true, true, true]);
    expect(['127.0.0.1', '::1', '10.0.0.1', '', 'localhost'].map(isWildcardHost)).toEqual([
      false,
      false,
      false,
      false,
      false,
    ]);
  });
});

describe('isLoopbackHost', () => {
  it.each(['127.0.0.1', '127.1.2.3', '::1', '[::1]', 'localhost', 'LOCALHOST', '::ffff:127.0.0.1'])(
    'counts %j as this machine',
    (h) => {
      expect(isLoopbackHost(h)).toBe(true);
    },
  );
  it.each(['0.0.0.0', '::', '[::]', '10.0.0.1', '::ffff:10.0.0.1', 'example.com', 'localhost.example.com', ''])(
    'does not count %j',
    (h) => {
      expect(isLoopbackHost(h)).toBe(false);
    },
  );
});
