// JSON Schema as grammar for the builtin engine: the walk that turns a
// client's schema into GBNF (schema.ts, with numbers, ranges, formats and
// patterns each in a file of its own), json_object's grammar with its
// numbers bounded (numbers.ts), and the check of answers for what a grammar
// can only approximate (validate.ts).
export { schemaGrammar, type SchemaGrammar } from './schema.js';
export { answerCheck, type AnswerCheck } from './validate.js';
export { boundJsonGrammarNumbers } from './numbers.js';
