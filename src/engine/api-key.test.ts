import { describe, expect, it } from 'vitest';
import { apiKeyGuards, bearerMatches } from './api-key.js';

describe('engine API key', () => {
  it('guards the OpenAI API and leaves the probes open', () => {
    for (const path of ['/v1/chat/completions', '/v1/completions', '/v1/embeddings', '/v1/models', '/v1'])
      expect(apiKeyGuards(path), path).toBe(true);
    for (const path of ['/health', '/metrics', '/v10', '/']) expect(apiKeyGuards(path), path).toBe(false);
  });

  it('takes only the exact key as a bearer token', () => {
    expect(bearerMatches('Bearer s3cret', 's3cret')).toBe(true);
    expect(bearerMatches('bearer s3cret', 's3cret'), 'the scheme is case-insensitive, as in HTTP').toBe(true);
    expect(bearerMatches(undefined, 's3cret')).toBe(false);
    expect(bearerMatches('', 's3cret')).toBe(false);
    expect(bearerMatches('Bearer s3cre', 's3cret')).toBe(false);
    expect(bearerMatches('Bearer s3cret2', 's3cret')).toBe(false);
    expect(bearerMatches('Basic s3cret', 's3cret')).toBe(false);
    expect(bearerMatches('s3cret', 's3cret')).toBe(false);
  });
});
