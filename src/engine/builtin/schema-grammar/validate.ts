// Checking an answer against the client's whole schema, for the keywords a
// grammar can only approximate (a regex with a lookahead, multipleOf,
// uniqueItems, a bound with a fraction). ajv is the validator clients
// themselves use (the AI SDK, LangChain and zod's JSON Schema all meet it),
// so "validates here" means "validates there". Apart from the grammar walk
// because it runs on answers, after generation, and needs no grammar.
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { LlmgwError } from '../../../errors/index.js';

/** An answer's check: null when it validates, else the first reason it does not, in ajv's words. */
export type AnswerCheck = (text: string) => string | null;

function validator(): Ajv2020 {
  // strict off: clients send keywords and formats ajv does not know (OpenAPI's `nullable`, vendor `x-` words); they
  // constrain nothing here, and are not worth a warning in the engine's log on every request.
  const ajv = new Ajv2020({ strict: false, allErrors: false, validateFormats: true, logger: false });
  // ajv-formats is CommonJS: under ESM its function arrives as the module object's default.
  addFormatsModule.default(ajv);
  return ajv;
}

/**
 * Compiled schemas by their text, newest last: a client sends the same tools
 * with every request of a conversation, and compiling costs milliseconds.
 * Each is compiled in an instance of its own, so dropping it frees it.
 */
const compiled = new Map<string, ValidateFunction>();
const COMPILED_KEPT = 256;

/**
 * A check of answers against `schema`, or a 400 naming `param` when ajv
 * cannot compile it (a $ref to nowhere, a keyword with a malformed value):
 * such a schema could never be met, so it is refused before any generation.
 */
export function answerCheck(schema: Record<string, unknown>, param: string): AnswerCheck {
  // The draft is the client's business; ajv's 2020 dialect reads draft-07 schemas' keywords too.
  const { $schema: _draft, ...rest } = schema;
  const text = JSON.stringify(rest);
  let validate = compiled.get(text);
  try {
    validate ??= validator().compile(rest);
  } catch (err) {
    throw new LlmgwError(
      'LLMGW_BAD_REQUEST',
      `the JSON schema in ${param} is not valid JSON Schema: ${err instanceof Error ? err.message : String(err)}`,
      { context: { param } },
    );
  }
  compiled.delete(text);
  compiled.set(text, validate);
  if (compiled.size > COMPILED_KEPT) compiled.delete(compiled.keys().next().value!);
  const check = validate;
  return (answer) => {
    let value: unknown;
    try {
      value = JSON.parse(answer);
    } catch {
      return 'the answer is not whole JSON';
    }
    if (check(value)) return null;
    const [first] = check.errors ?? [];
    return first ? `${first.instancePath || '/'} ${first.message ?? 'is invalid'}` : 'the answer does not validate';
  };
}
