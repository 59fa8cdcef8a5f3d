import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, LlmgwError, ValidationError } from './index.js';

const doc = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');

describe('error codes', () => {
  it('every code is documented with its status', () => {
    for (const [code, status] of Object.entries(ERROR_CODES)) {
      expect(doc, `docs/errors.md has no row for ${code}`).toContain(`| \`${code}\` | ${status} |`);
    }
  });

  it('the document names no code that no longer exists', () => {
    const documented = [...doc.matchAll(/\| `(LLMGW_[A-Z_]+)` \|/g)].map((m) => m[1]);
    const stale = documented.filter((c) => !(c! in ERROR_CODES));
    expect(stale, 'codes in docs/errors.md that the code no longer raises').toEqual([]);
  });

  it('a validation error lists every problem', () => {
    const err = new ValidationError('LLMGW_CATALOG_INVALID', ['a is wrong', 'b is wrong'], 'model x');
    expect(err.message).toBe('model x:\n- a is wrong\n- b is wrong');
    expect(err).toBeInstanceOf(LlmgwError);
    expect(err.status).toBe(400);
  });
});
