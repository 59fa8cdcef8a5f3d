// The schema walk's grammars, checked by llama.cpp's own matcher (through
// node-llama-cpp) without a model: ranges take every number inside and none
// outside, formats take what ajv-formats takes, and the keywords a grammar
// cannot hold are named in `loose` rather than refused. Before this walk the
// builtin engine answered `z.number().int()` (minimum/maximum) and
// `z.string().email()` (format) with a 400.
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import { accepts, useLlama } from '../../../../test/support/builtin-engine.js';
import { LlmgwError } from '../../../errors/index.js';
import { FORMAT_GRAMMARS } from './formats.js';
import { integerRange, numberRange } from './ranges.js';
import { schemaGrammar } from './schema.js';
import { answerCheck } from './validate.js';

const llama = useLlama();

const grammarOf = (gbnf: string) => llama().createGrammar({ grammar: gbnf });
const forSchema = async (schema: unknown) => grammarOf(schemaGrammar(schema, 's').gbnf);

const ajv = new Ajv2020({ strict: false });
addFormatsModule.default(ajv);

describe('ranges', () => {
  it('an integer range takes every integer inside it and none outside', async () => {
    for (const [lo, hi] of [
      [0, 0],
      [1, 10],
      [-12, 7],
      [-300, -17],
      [95, 1234],
      [7, 7],
    ] as const) {
      const grammar = await grammarOf(`root ::= ${integerRange(lo, hi)}`);
      for (let n = lo - 30; n <= hi + 30; n++)
        expect(accepts(grammar, String(n)), `${n} in [${lo}, ${hi}]`).toBe(n >= lo && n <= hi);
      expect(accepts(grammar, `0${hi}`), 'no leading zeros').toBe(false);
    }
  });

  it('a number range honours inclusive and exclusive bounds, fractions included', async () => {
    const cases = [
      { lo: { value: 0, exclusive: false }, hi: { value: 1, exclusive: false } },
      { lo: { value: 0, exclusive: true }, hi: { value: 10, exclusive: true } },
      { lo: { value: -5, exclusive: false }, hi: { value: -2, exclusive: true } },
      { lo: { value: -3, exclusive: true }, hi: { value: 3, exclusive: false } },
      { lo: null, hi: { value: 0, exclusive: true } },
    ];
    const samples = [
      '0',
      '0.5',
      '1',
      '1.0',
      '1.01',
      '-0.5',
      '-1',
      '-2',
      '-2.0',
      '-2.5',
      '-3',
      '-3.0',
      '-3.5',
      '-5',
      '-5.1',
    ];
    samples.push('2.99', '3', '3.0', '3.01', '9.99', '10', '10.0', '0.0', '-0.0', '0.001', '-4.2', '5', '-1000.25');
    for (const { lo, hi } of cases) {
      const grammar = await grammarOf(`root ::= ${numberRange(lo, hi)}`);
      for (const text of samples) {
        const n = Number(text);
        const inside =
          (lo === null || (lo.exclusive ? n > lo.value : n >= lo.value)) &&
          (hi === null || (hi.exclusive ? n < hi.value : n <= hi.value));
        // The grammar may write a subset (never "-0.0" for a range that starts at 0), never more.
        if (accepts(grammar, text)) expect(inside, `${text} accepted for ${JSON.stringify({ lo, hi })}`).toBe(true);
        else if (!text.startsWith('-0'))
          expect(inside, `${text} refused for ${JSON.stringify({ lo, hi })}`).toBe(false);
      }
    }
  });
});

describe('formats', () => {
  it('every format grammar takes a value ajv-formats takes, and refuses a malformed one', async () => {
    const good: Record<string, string> = {
      date: '2024-02-28',
      time: '23:59:59Z',
      'date-time': '1999-12-01T00:00:00.123Z',
      duration: 'P3D',
      email: 'ada.l@example.org',
      hostname: 'db-1.internal',
      ipv4: '192.168.0.255',
      ipv6: '2001:db8:0:0:0:0:2:1',
      uuid: '123e4567-e89b-42d3-a456-426614174000',
      uri: 'https://example.com/a/b',
    };
    const bad: Record<string, string> = {
      date: '2024-13-01',
      time: '24:00:00Z',
      'date-time': '1999-12-01 00:00:00Z',
      duration: 'P',
      email: 'no-at-sign',
      hostname: '-leading.dash',
      ipv4: '256.1.1.1',
      ipv6: '2001:db8::zz',
      uuid: '123e4567e89b42d3a456426614174000',
      uri: 'not a uri',
    };
    expect(Object.keys(good).sort()).toEqual(Object.keys(FORMAT_GRAMMARS).sort());
    for (const [format, body] of Object.entries(FORMAT_GRAMMARS)) {
      const grammar = await grammarOf(`root ::= ${body}`);
      expect(ajv.validate({ type: 'string', format }, good[format]), `${format}: ajv takes ${good[format]}`).toBe(true);
      expect(accepts(grammar, good[format]!), `${format} grammar takes ${good[format]}`).toBe(true);
      expect(accepts(grammar, bad[format]!), `${format} grammar refuses ${bad[format]}`).toBe(false);
    }
  });
});

describe('schemaGrammar', () => {
  const schema = {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    type: 'object',
    properties: {
      n: { type: 'integer', minimum: -9007199254740991, maximum: 9007199254740991 },
      pct: { type: 'number', minimum: 0, maximum: 100 },
      kind: { enum: ['a', 'b'] },
      v: { const: 2 },
      tags: { type: 'array', items: { type: 'string', maxLength: 3 }, minItems: 1, maxItems: 2 },
      maybe: { anyOf: [{ type: 'string', format: 'email' }, { type: 'null' }] },
      child: { $ref: '#/$defs/child' },
    },
    required: ['n', 'pct', 'kind', 'v', 'tags', 'maybe', 'child'],
    additionalProperties: false,
    $defs: { child: { type: 'object', properties: { id: { type: 'string', format: 'uuid' } }, required: ['id'] } },
  };

  it('writes compact JSON that validates, and nothing that does not', async () => {
    const { gbnf, loose } = schemaGrammar(schema, 's');
    expect(loose, 'every keyword here is held by the grammar').toEqual([]);
    const grammar = await grammarOf(gbnf);
    const ok = {
      n: -42,
      pct: 99.5,
      kind: 'b',
      v: 2,
      tags: ['x', 'abc'],
      maybe: null,
      child: { id: '123e4567-e89b-42d3-a456-426614174000' },
    };
    expect(ajv.validate(schema, ok)).toBe(true);
    expect(accepts(grammar, JSON.stringify(ok))).toBe(true);
    for (const broken of [
      { ...ok, pct: 100.5 },
      { ...ok, kind: 'c' },
      { ...ok, v: 3 },
      { ...ok, tags: [] },
      { ...ok, tags: ['a', 'b', 'c'] },
      { ...ok, tags: ['abcd'] },
      { ...ok, maybe: 'nobody' },
      { ...ok, child: { id: 'x' } },
      { ...ok, n: 1.5 },
    ]) {
      expect(ajv.validate(schema, broken), JSON.stringify(broken)).toBe(false);
      expect(accepts(grammar, JSON.stringify(broken)), JSON.stringify(broken)).toBe(false);
    }
  });

  it('follows recursive $refs and draft-07 definitions', async () => {
    const tree = {
      type: 'object',
      properties: { name: { type: 'string' }, kids: { type: 'array', items: { $ref: '#' }, maxItems: 2 } },
      required: ['name', 'kids'],
    };
    const grammar = await forSchema(tree);
    expect(accepts(grammar, '{"name":"a","kids":[{"name":"b","kids":[]}]}')).toBe(true);
    expect(accepts(grammar, '{"name":"a","kids":[{"name":"b"}]}')).toBe(false);
    const draft7 = { definitions: { d: { type: 'boolean' } }, type: 'array', items: { $ref: '#/definitions/d' } };
    expect(accepts(await forSchema(draft7), '[true,false]')).toBe(true);
  });

  it('names what it only approximates instead of refusing it', () => {
    const { loose } = schemaGrammar(
      {
        type: 'object',
        properties: {
          even: { type: 'integer', multipleOf: 2 },
          set: { type: 'array', items: { type: 'integer' }, uniqueItems: true },
          code: { type: 'string', pattern: '^(?!x)[a-z]+$' },
          one: { oneOf: [{ type: 'string' }, { type: 'integer' }] },
          narrow: { type: 'number', minimum: 0.2, maximum: 0.8 },
        },
      },
      's',
    );
    expect(loose.sort()).toEqual([
      's.properties.code.pattern',
      's.properties.even.multipleOf',
      's.properties.narrow.minimum',
      's.properties.one.oneOf',
      's.properties.set.uniqueItems',
    ]);
  });

  it('refuses a schema no answer could meet, naming where', () => {
    const where = (s: unknown) => {
      try {
        schemaGrammar(s, 's');
        return 'accepted';
      } catch (err) {
        expect(err).toBeInstanceOf(LlmgwError);
        return (err as LlmgwError).context.param;
      }
    };
    expect(where({ type: 'string', minLength: 5, maxLength: 2 })).toBe('s.minLength');
    expect(where({ type: 'integer', minimum: 3, maximum: 2 })).toBe('s');
    expect(where({ $ref: '#/$defs/missing' })).toBe('s.$ref');
    expect(where({ type: 'object', properties: { a: false } })).toBe('s.properties.a');
    expect(where({ type: 'wat' })).toBe('s.type');
    expect(where({ type: ['string', 'null'], format: 'date' })).toBe('accepted');
  });
});

describe('answerCheck', () => {
  it("checks an answer against the whole schema in ajv's words, and refuses a schema ajv cannot compile", () => {
    const check = answerCheck(
      { $schema: 'http://json-schema.org/draft-07/schema#', type: 'integer', multipleOf: 2 },
      'p',
    );
    expect(check('4')).toBeNull();
    expect(check('3')).toMatch(/multiple of 2/);
    expect(check('{"cut')).toBe('the answer is not whole JSON');
    expect(() => answerCheck({ type: 'integer', minimum: 'low' }, 'p')).toThrow(/the JSON schema in p is not valid/);
    // A format ajv does not know constrains nothing, as in clients' own validators: no refusal for it.
    expect(answerCheck({ type: 'string', format: 'x-house-style' }, 'p')('"anything"')).toBeNull();
  });
});
