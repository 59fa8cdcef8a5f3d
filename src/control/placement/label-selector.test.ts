import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../errors/index.js';
import { labelMismatches, labelSelectorProblem, matchesLabels, parseLabelSelector } from './label-selector.js';

describe('pool selectors', () => {
  it('parses every Kubernetes form, comma meaning AND', () => {
    expect(
      parseLabelSelector('pool=a100, zone in (a,b), gpu!=t4, region==eu, tier notin (batch), ssd, !spot').requirements,
    ).toEqual([
      { key: 'pool', op: 'eq', value: 'a100' },
      { key: 'zone', op: 'in', values: ['a', 'b'] },
      { key: 'gpu', op: 'neq', value: 't4' },
      { key: 'region', op: 'eq', value: 'eu' },
      { key: 'tier', op: 'notin', values: ['batch'] },
      { key: 'ssd', op: 'exists' },
      { key: 'spot', op: 'not_exists' },
    ]);
  });

  it('accepts prefixed keys and an empty value, as Kubernetes does', () => {
    expect(parseLabelSelector('llmgw.example.com/pool=a100').requirements).toEqual([
      { key: 'llmgw.example.com/pool', op: 'eq', value: 'a100' },
    ]);
    expect(parseLabelSelector('pool=').requirements).toEqual([{ key: 'pool', op: 'eq', value: '' }]);
  });

  it('matches labels with Kubernetes semantics: != and notin also match a node without the label', () => {
    const sel = parseLabelSelector('gpu!=t4,tier notin (batch)');
    expect(matchesLabels(sel, {}), 'a node with neither label').toBe(true);
    expect(matchesLabels(sel, { gpu: 't4' })).toBe(false);
    expect(matchesLabels(sel, { tier: 'batch' })).toBe(false);
    const inSet = parseLabelSelector('zone in (a,b)');
    expect(matchesLabels(inSet, { zone: 'b' })).toBe(true);
    expect(matchesLabels(inSet, {}), 'in needs the label').toBe(false);
    expect(matchesLabels(parseLabelSelector('!spot'), { spot: 'false' }), '!key is about presence, not value').toBe(
      false,
    );
    expect(matchesLabels(parseLabelSelector(''), { any: 'thing' }), 'an empty selector matches every node').toBe(true);
  });

  it.each([
    ['zone in (a,b', 'missing ")" to close the values of "zone in"'],
    ['zone in a,b', '"zone in" must be followed by a list of values in parentheses, like (a,b); found "a"'],
    ['zone in ()', 'a value is missing in the list after "zone in" (found ")")'],
    ['pool=a100,', 'a requirement is missing after the last ","'],
    ['pool=a100 zone=b', 'expected "," between requirements, found "zone"'],
    ['gpus>4', 'the ">" operator is not supported; pools match label names, not numbers'],
    ['!', '"!" must be followed by a label key, found the end'],
    ['-pool=a', '"-pool" is not a valid label key'],
    ['pool=a b', 'expected "," between requirements, found "b"'],
    ['pool=(a)', 'a value must follow "pool=", found "("'],
    ['=a100', 'expected a label key, found "="'],
  ])('refuses %j, saying what is wrong', (text, problem) => {
    let error: unknown;
    try {
      parseLabelSelector(text);
    } catch (err) {
      error = err;
    }
    expect(error, `parsing ${JSON.stringify(text)} should fail`).toBeInstanceOf(ValidationError);
    const v = error as ValidationError;
    expect(v.code).toBe('LLMGW_CATALOG_INVALID');
    expect(v.message).toContain(`pool selector ${JSON.stringify(text)}: ${problem}`);
    expect(v.message, 'the message shows the accepted forms').toContain('write requirements like pool=a100');
  });

  it('reports a problem as a sentence for callers that gather problems, and null for a valid selector', () => {
    expect(labelSelectorProblem('zone in (a')).toBe(
      'pool selector "zone in (a": missing ")" to close the values of "zone in"',
    );
    expect(labelSelectorProblem('zone in (a)')).toBeNull();
  });

  it('words each failed requirement for a rejection', () => {
    const sel = parseLabelSelector('pool=a100,zone in (a,b),gpu!=t4,ssd,!spot');
    expect(labelMismatches(sel, { pool: 't4', gpu: 't4', spot: 'true' })).toEqual([
      'label pool is "t4" (wants a100)',
      'label zone is not set (wants one of a, b)',
      'label gpu is "t4", which the pool excludes',
      'label ssd is not set',
      'label spot is "true", which the pool excludes',
    ]);
    expect(labelMismatches(sel, { pool: 'a100', zone: 'a', ssd: '' })).toEqual([]);
  });
});
