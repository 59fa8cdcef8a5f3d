import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { LlmgwError, ValidationError, type ErrorCode } from '../errors/index.js';
import { parseOptions } from './options.js';

const Schema = z.strictObject({
  parallel: z.number().int().min(1).default(1),
  models: z.array(z.string().min(1)).optional(),
});

/** The error parseOptions threw, or a failed expectation when it returned. */
function refusal(input: unknown, lead: string, code?: ErrorCode): ValidationError {
  try {
    parseOptions(Schema, input, lead, code);
  } catch (err) {
    expect(err, 'parseOptions throws a ValidationError').toBeInstanceOf(ValidationError);
    return err as ValidationError;
  }
  throw new Error(`parseOptions accepted ${JSON.stringify(input)}`);
}

describe('parseOptions', () => {
  it('returns zod’s output, defaults filled', () => {
    expect(parseOptions(Schema, {}, 'the options')).toEqual({ parallel: 1 });
    expect(parseOptions(Schema, { parallel: 3, models: ['a'] }, 'the options')).toEqual({ parallel: 3, models: ['a'] });
  });

  it('words one problem on the lead’s line, naming the field and the nearest valid key', () => {
    const err = refusal({ parralel: 2 }, 'the sim engine options are not valid');
    expect(err.message).toBe('the sim engine options are not valid: parralel: unknown field; did you mean "parallel"?');
    expect(err.problems).toEqual(['parralel: unknown field; did you mean "parallel"?']);
  });

  it('lists every problem under the lead, each with its path', () => {
    const err = refusal({ parallel: 0, models: ['a', ''] }, 'builtin engine options');
    expect(err.problems, 'one sentence per problem, so a user fixes them in one round').toHaveLength(2);
    expect(err.message).toMatch(/^builtin engine options:\n- parallel: .+\n- models\[1\]: .+$/);
  });

  it('is an LlmgwError with LLMGW_CONFIG_INVALID, or the code it is given', () => {
    const config = refusal({ parallel: 'two' }, 'the options');
    expect(config).toBeInstanceOf(LlmgwError);
    expect(config.code).toBe('LLMGW_CONFIG_INVALID');
    expect(config.status).toBe(400);
    expect(refusal({ parallel: 'two' }, 'model x', 'LLMGW_CATALOG_INVALID').code).toBe('LLMGW_CATALOG_INVALID');
  });

  it('words an input that is not an object at all', () => {
    expect(refusal('fast', 'the options').message).toMatch(/^the options: \(the whole value\): /);
  });
});
