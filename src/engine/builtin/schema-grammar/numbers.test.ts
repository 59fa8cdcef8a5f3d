// Regression tests for numbers clients could not read: node-llama-cpp's
// schema grammars and llama.cpp's json.gbnf let a model write `9e63764` or
// `-9e-8050`, which JavaScript reads as Infinity and -0, so the AI SDK's
// generateObject and LangChain's function calling failed on answers the
// grammar had promised would validate. Here the bounded grammars refuse such
// numbers, and the random-weight model, which writes whatever its grammar
// allows, only ever writes finite ones.
import type { LlamaGrammar } from 'node-llama-cpp';
import { describe, expect, it } from 'vitest';
import { accepts, useLlama, useTinyEngine } from '../../../../test/support/builtin-engine.js';
import { boundJsonGrammarNumbers } from './numbers.js';
import { schemaGrammar as ourSchemaGrammar } from './schema.js';

// Overflow, underflow, and (the last two) past the bounds that keep every number far from both and every integer part exact.
const REFUSED = ['9e63764', '-9e-8050', '1e309', '-1e309', '1e-400', '1e100', '1234567890123456'];
const ORDINARY = ['0', '-0.5', '42', '3.14159', '-17', '6.02e23', '1.5E-7', '999999999999999', '1e99'];

const llama = useLlama();

async function schemaGrammar(schema: object): Promise<{ before: LlamaGrammar; after: LlamaGrammar }> {
  const before = await llama().createGrammarForJsonSchema(schema as never);
  const after = await llama().createGrammar({
    grammar: ourSchemaGrammar(schema, 'schema').gbnf,
  });
  return { before, after };
}

describe('bounded number grammars', () => {
  it('a schema grammar refuses numbers that overflow, underflow or lose digits, and takes ordinary ones', async () => {
    const { before, after } = await schemaGrammar({ type: 'object', properties: { x: { type: 'number' } } });
    const doc = (n: string) => `{"x":${n}}`;
    // node-llama-cpp's own rule takes them: what made clients read Infinity.
    expect(accepts(before, `{"x": 9e63764}\n\n\n\n`)).toBe(true);
    for (const n of REFUSED) expect(accepts(after, doc(n)), n).toBe(false);
    for (const n of ORDINARY) {
      expect(accepts(after, doc(n)), n).toBe(true);
      expect(Number.isFinite(JSON.parse(n)), n).toBe(true);
    }
  });

  it('an integer takes neither a fraction nor an exponent, and stays a safe integer', async () => {
    const { before, after } = await schemaGrammar({ type: 'object', properties: { n: { type: 'integer' } } });
    const doc = (n: string) => `{"n":${n}}`;
    expect(accepts(before, `{"n": 1e-5}\n\n\n\n`), 'node-llama-cpp lets an "integer" have an exponent').toBe(true);
    for (const n of ['1e-5', '1e5', '2.0', '1234567890123456', '9e63764'])
      expect(accepts(after, doc(n)), n).toBe(false);
    for (const n of ['0', '-3', '999999999999999']) {
      expect(accepts(after, doc(n)), n).toBe(true);
      expect(Number.isSafeInteger(JSON.parse(n)), n).toBe(true);
    }
  });

  it('bounds a number the schema puts at the root, where node-llama-cpp inlines the rule', async () => {
    const { after } = await schemaGrammar({ type: 'number' });
    expect(accepts(after, '9e63764')).toBe(false);
    expect(accepts(after, '2.5e3')).toBe(true);
  });

  it('bounds numbers nested in arrays, unions and free-form objects', async () => {
    const { after } = await schemaGrammar({
      type: 'object',
      properties: {
        list: { type: 'array', items: { type: ['number', 'string'] } },
        free: { type: 'object', additionalProperties: true },
      },
    });
    const doc = (list: string, free: string) => `{"list":[${list}],"free":{"k":${free}}}`;
    expect(accepts(after, doc('1,"a"', '2'))).toBe(true);
    expect(accepts(after, doc('1e309', '2'))).toBe(false);
    expect(accepts(after, doc('1', '-9e-8050'))).toBe(false);
  });

  it('bounds json_object answers (llama.cpp json.gbnf)', async () => {
    const json = await llama().getGrammarFor('json');
    const after = await llama().createGrammar({ grammar: boundJsonGrammarNumbers(json.grammar) });
    expect(accepts(json, '{"a": 9e63764}'), 'json.gbnf as shipped takes it').toBe(true);
    for (const n of REFUSED) expect(accepts(after, `{"a": ${n}}`), n).toBe(false);
    for (const n of ORDINARY) expect(accepts(after, `{"a": [${n}, {"b": ${n}}]}`), n).toBe(true);
    // More than 15 fraction digits would only be rounded away; json.gbnf took any number of them.
    expect(accepts(after, '{"a": 0.1234567890123456}')).toBe(false);
  });

  it('refuses a json.gbnf it cannot bound', () => {
    expect(() => boundJsonGrammarNumbers('root ::= object\nobject ::= "{}"')).toThrow(/number rule/);
  });
});

describe('numbers the random-weight model writes', () => {
  const MODEL = 'tiny';
  const SCHEMA = {
    type: 'object',
    properties: {
      x: { type: 'number' },
      n: { type: 'integer' },
      xs: { type: 'array', items: { type: 'number' }, maxItems: 3 },
    },
    required: ['x', 'n', 'xs'],
    additionalProperties: false,
  } as const;

  const { client } = useTinyEngine({ model: MODEL, contextTokens: 2048 });

  /** Every number in an answer: finite, non-zero when a digit of it is, and the integer a safe integer. */
  function expectReadable(json: string): void {
    const value = JSON.parse(json) as { x: number; n: number; xs: number[] };
    const texts = json.match(/-?\d[\d.eE+-]*/g) ?? [];
    expect(texts.length, json).toBeGreaterThanOrEqual(2);
    for (const text of texts) {
      const n = Number(text);
      expect(Number.isFinite(n), `${text} in ${json}`).toBe(true);
      if (/[1-9]/.test(text.split(/[eE]/)[0]!)) expect(n, `${text} in ${json} underflows`).not.toBe(0);
    }
    expect(Number.isSafeInteger(value.n), json).toBe(true);
    expect([value.x, ...value.xs].every(Number.isFinite), json).toBe(true);
  }

  it('answers a json_schema format with finite numbers only', async () => {
    for (const seed of [1, 2, 3, 4, 5, 6, 7, 8]) {
      const reply = await client().chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: 'Some numbers, please.' }],
        response_format: { type: 'json_schema', json_schema: { name: 'numbers', schema: SCHEMA } },
        temperature: 1.5,
        max_tokens: 400,
        seed,
      });
      expect(reply.choices[0]!.finish_reason).toBe('stop');
      expectReadable(reply.choices[0]!.message.content!);
    }
  });

  it('writes a forced call with finite numbers only', async () => {
    for (const seed of [11, 12, 13, 14, 15, 16, 17, 18]) {
      const reply = await client().chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: 'Add some numbers.' }],
        tools: [{ type: 'function', function: { name: 'add', parameters: SCHEMA } }],
        tool_choice: { type: 'function', function: { name: 'add' } },
        temperature: 1.5,
        max_tokens: 400,
        seed,
      });
      expect(reply.choices[0]!.finish_reason).toBe('tool_calls');
      const call = reply.choices[0]!.message.tool_calls![0]!;
      if (call.type !== 'function') throw new Error('not a function call');
      expectReadable(call.function.arguments);
    }
  });
});
