// What the random-weight model writes under each schema keyword OpenAI's
// structured outputs accept, checked with ajv as clients check it. Random
// weights write whatever a grammar allows, so an answer that validates here
// validates because the grammar held, not because the model knew better.
// Before schema-grammar the builtin engine refused ranges, most formats and
// patterns with a 400 (`z.number().int()`, `z.string().email()`).
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { useTinyEngine } from '../../../../test/support/builtin-engine.js';

const MODEL = 'tiny';
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormatsModule.default(ajv);

/** One property per keyword, so a failure names the keyword that let a bad value through. */
const KEYWORDS = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  properties: {
    int: { type: 'integer', minimum: -9007199254740991, maximum: 9007199254740991 },
    small: { type: 'integer', minimum: 1, maximum: 12 },
    above: { type: 'integer', exclusiveMinimum: 100 },
    ratio: { type: 'number', minimum: 0, maximum: 1 },
    positive: { type: 'number', exclusiveMinimum: 0, exclusiveMaximum: 5 },
    when: { type: 'string', format: 'date-time' },
    day: { type: 'string', format: 'date' },
    at: { type: 'string', format: 'time' },
    took: { type: 'string', format: 'duration' },
    mail: { type: 'string', format: 'email' },
    host: { type: 'string', format: 'hostname' },
    v4: { type: 'string', format: 'ipv4' },
    v6: { type: 'string', format: 'ipv6' },
    id: { type: 'string', format: 'uuid' },
    code: { type: 'string', pattern: '^[A-Z]{3}-\\d{4}$' },
    tags: { type: 'array', items: { type: 'string', maxLength: 4 }, minItems: 1, maxItems: 3 },
    level: { enum: ['low', 'high', 3] },
    version: { const: 'v1' },
    either: { anyOf: [{ type: 'boolean' }, { type: 'integer', maximum: 0 }] },
    point: { $ref: '#/$defs/point' },
    nested: {
      type: 'object',
      properties: { inner: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] } },
      required: ['inner'],
      additionalProperties: false,
    },
  },
  required: [] as string[],
  additionalProperties: false,
  $defs: {
    point: {
      type: 'object',
      properties: {
        x: { type: 'integer', minimum: -10, maximum: 10 },
        y: { type: 'integer', minimum: -10, maximum: 10 },
      },
      required: ['x', 'y'],
      additionalProperties: false,
    },
  },
};
KEYWORDS.required = Object.keys(KEYWORDS.properties);

/** What zod 4 sends for `z.string().email()` and `z.number().int()`: a format with its own pattern, and safe-integer bounds. */
const ZOD = {
  type: 'object',
  properties: {
    email: {
      type: 'string',
      format: 'email',
      pattern:
        "^(?:[A-Za-z0-9_'+\\-]+\\.)*[A-Za-z0-9_'+\\-]*[A-Za-z0-9_+-]@(?:[A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$",
    },
    count: { type: 'integer', minimum: -9007199254740991, maximum: 9007199254740991 },
  },
  required: ['email', 'count'],
  additionalProperties: false,
};

const { client } = useTinyEngine({ model: MODEL, contextTokens: 4096 });

function expectValid(schema: object, json: string): void {
  const validate = ajv.compile(schema);
  const value: unknown = JSON.parse(json);
  expect(validate(value), `${json}\n${ajv.errorsText(validate.errors)}`).toBe(true);
}

describe('answers the random-weight model writes validate', () => {
  it('under response_format json_schema, for every keyword', async () => {
    for (const seed of [1, 2, 3, 4]) {
      const reply = await client().chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: 'Fill it in.' }],
        response_format: { type: 'json_schema', json_schema: { name: 'all', schema: KEYWORDS, strict: true } },
        temperature: 1.5,
        max_tokens: 2000,
        seed,
      });
      expect(reply.choices[0]!.finish_reason, `seed ${seed}`).toBe('stop');
      expectValid(KEYWORDS, reply.choices[0]!.message.content!);
    }
  });

  it("in a forced tool call, zod's email and int included, streamed as written", async () => {
    for (const seed of [5, 6, 7]) {
      const stream = await client().chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: 'Sign up.' }],
        tools: [{ type: 'function', function: { name: 'signup', parameters: ZOD } }],
        tool_choice: { type: 'function', function: { name: 'signup' } },
        temperature: 1.5,
        max_tokens: 400,
        seed,
        stream: true,
      });
      let args = '';
      let chunks = 0;
      let finish: string | null = null;
      for await (const chunk of stream) {
        const delta = chunk.choices[0]?.delta.tool_calls?.[0]?.function?.arguments;
        if (delta) {
          args += delta;
          chunks++;
        }
        finish = chunk.choices[0]?.finish_reason ?? finish;
      }
      expect(finish).toBe('tool_calls');
      expectValid(ZOD, args);
      // The email's pattern is checked after (the grammar writes the format), so the call arrives whole at the end.
      expect(chunks, 'held back until checked').toBe(1);
    }
  });

  it('a keyword the grammar only approximates: each answer returned validates, or the engine says why not', async () => {
    const schema = {
      type: 'object',
      properties: { even: { type: 'integer', minimum: 0, maximum: 9, multipleOf: 2 } },
      required: ['even'],
      additionalProperties: false,
    };
    const outcomes: string[] = [];
    for (const seed of [21, 22, 23, 24, 25, 26]) {
      try {
        const reply = await client().chat.completions.create({
          model: MODEL,
          messages: [{ role: 'user', content: 'An even digit.' }],
          response_format: { type: 'json_schema', json_schema: { name: 'even', schema } },
          temperature: 1.5,
          max_tokens: 50,
          seed,
        });
        expectValid(schema, reply.choices[0]!.message.content!);
        outcomes.push('valid');
      } catch (err) {
        if (!(err instanceof OpenAI.APIError)) throw err;
        expect(err.status).toBe(500);
        expect(err.message).toMatch(/two answers that break the schema in response_format\.json_schema\.schema/);
        expect(err.message).toContain('response_format.json_schema.schema.properties.even.multipleOf');
        outcomes.push('refused');
      }
    }
    // Half the digits are even: with a second try most requests succeed.
    expect(outcomes.filter((o) => o === 'valid').length, outcomes.join(', ')).toBeGreaterThan(0);
  });
});
