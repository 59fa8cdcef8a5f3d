// Numbers in the JSON that the builtin engine's grammars write, bounded so
// that every JSON parser reads each of them as a finite double with its
// value. node-llama-cpp's schema grammars allowed exponents of up to 16
// digits and llama.cpp's json.gbnf as many, so a model (the random-weight
// demo most of all) could write `9e63764` or `-9e-8050`, which JavaScript
// reads as Infinity and -0: clients' schema checks then failed on an answer
// the grammar promised. The number rules below are what schema-grammar
// writes, and json.gbnf's is rewritten to them. Apart from llama-runtime.ts
// because this is grammar text, not node-llama-cpp's API.

/**
 * A JSON number that is always finite, never rounds to zero, and whose
 * digits stay within what a double holds:
 * - at most 15 digits before the point: 15 is the most decimal digits a
 *   double keeps exactly (DBL_DIG), so a written integer part is the value
 *   read, and 999,999,999,999,999 is below 2^53 (a safe integer);
 * - at most 15 digits after it: more are rounded away by every parser, and
 *   an unbounded fraction lets random weights write digits until max_tokens
 *   cuts the JSON short;
 * - an exponent of at most two digits (|e| <= 99): the largest value, just
 *   under 1e115, is far below a double's 1.8e308 and the smallest non-zero
 *   one, 1e-114, far above its 2.2e-308, so nothing overflows to Infinity
 *   or underflows to 0 (or -0) in any IEEE-754 parser.
 * Written without a top-level `|`, so it can stand in for a rule's body
 * inline as well as on a line of its own.
 */
export const BOUNDED_NUMBER = '"-"? ("0" | [1-9] [0-9]{0,14}) ("." [0-9]{1,15})? ([eE] [-+]? [0-9]{1,2})?';

/**
 * A JSON Schema `integer`: digits only, at most 15 (every one a safe
 * integer, so zod's `.int()` and JavaScript's Number.isSafeInteger accept
 * it). node-llama-cpp's integer rule takes an exponent, which lets `1e-5`
 * through as an "integer"; with no fraction and no exponent the text is the
 * integer.
 */
export const BOUNDED_INTEGER = '"-"? ("0" | [1-9] [0-9]{0,14})';

/**
 * llama.cpp's json.gbnf (what `response_format: json_object` is written
 * under) with its `number` rule bounded; the whitespace after a number stays
 * as the file has it. Throws when the file has no one-line `number` rule:
 * that is a node-llama-cpp upgrade this function must follow, and serving
 * unbounded numbers silently would bring back the bug.
 */
export function boundJsonGrammarNumbers(gbnf: string): string {
  const rule = /^number\s*::=.*?(\s+ws)?\s*$/m;
  const match = rule.exec(gbnf);
  if (!match)
    throw new Error('llama.cpp json.gbnf has no one-line number rule to bound; update schema-grammar/numbers.ts');
  return gbnf.replace(rule, `number ::= (${BOUNDED_NUMBER})${match[1] ?? ''}`);
}
