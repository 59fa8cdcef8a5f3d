// The schemas the client-library matrix (test/clients/) sends, written in zod
// as the AI SDK's, LangChain's and the OpenAI SDK's users write them, and the
// check that an answer validates against them. The demo model has random
// weights, so only the grammar stands between its answers and garbage: a
// test asserts an answer's SHAPE (it validates, with ajv, against the JSON
// Schema the zod turns into), never its content.
//
// These are exactly the shapes issue 35 found refused or broken: zod's
// `.int()` emits minimum/maximum (safe-integer bounds), `.email()` emits a
// format and a pattern, `z.number()` once admitted 9e63764 (Infinity to
// JavaScript). Strings a random model writes end on their own within a few
// hundred tokens; arrays are bounded (maxItems) so an answer stays short.
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { z } from 'zod';

/** A tool's arguments, as an agent's or a chat app's tool declares them. */
export const weatherArgs = z.object({
  city: z.string().describe('the city to forecast'),
  days: z.number().int().min(1).max(7).describe('how many days ahead'),
  unit: z.enum(['celsius', 'fahrenheit']),
});

/** A structured answer: a safe integer, a free number, an email, an enum, a short bounded array. */
export const forecast = z.object({
  city: z.string(),
  days: z.number().int(),
  high: z.number(),
  unit: z.enum(['celsius', 'fahrenheit']),
  alerts: z.array(z.string().max(24)).max(3),
  contact: z.string().email(),
});

/**
 * `forecast` less its email, for streams that should arrive piece by piece.
 * The builtin engine's grammar writes an email's format but checks zod's
 * pattern for it only once the answer is whole, so it holds such an answer
 * back until it validates and the client gets it in one delta; everything
 * here the grammar enforces as it writes, so partial objects stream.
 */
export const streamedForecast = forecast.omit({ contact: true });

/**
 * Reply budget for an answer the grammar shapes: the demo's free strings run
 * 50-200 tokens, so 1,200 leaves a wide margin inside its 4,096-token context
 * (a tool prompt is about 1,000) while an unshaped reply would still stop.
 */
export const SHAPED_MAX_TOKENS = 1200;

/** Reply budget for free text: any few tokens show a real completion. */
export const TEXT_MAX_TOKENS = 16;

const ajv = new Ajv2020({ strict: false, allErrors: true });
// ajv-formats is CommonJS: under ESM its function arrives as the module object's default.
addFormatsModule.default(ajv);
const compiled = new WeakMap<z.ZodType, ValidateFunction>();

/** The JSON Schema `schema` turns into, as a client library built on zod sends it. */
export function jsonSchemaOf(schema: z.ZodType): Record<string, unknown> {
  const { $schema: _draft, ...rest } = z.toJSONSchema(schema) as Record<string, unknown>;
  return rest;
}

/**
 * Null when `value` validates against `schema`'s JSON Schema, else ajv's
 * reasons with the value. ajv's `number` admits only finite numbers, so an
 * exponent JSON.parse read as Infinity fails here as it fails for clients.
 */
export function schemaErrors(schema: z.ZodType, value: unknown): string | null {
  let validate = compiled.get(schema);
  if (!validate) {
    validate = ajv.compile(jsonSchemaOf(schema));
    compiled.set(schema, validate);
  }
  if (validate(value)) return null;
  return `${ajv.errorsText(validate.errors)} in ${JSON.stringify(value)}`;
}

/** `text` read as JSON, or an error that shows it (a cut-off answer reads here as a cut-off answer). */
export function parseJson(text: string | null | undefined, what: string): unknown {
  try {
    return JSON.parse(text ?? '');
  } catch (err) {
    throw new Error(`${what} is not JSON (${(err as Error).message}): ${String(text).slice(0, 400)}`);
  }
}
