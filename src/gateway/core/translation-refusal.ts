// The 400 every step of a dialect's translation throws (Messages and
// Responses, both directions), naming the field, and the JSON object test
// they all need. It sits in the gateway's core, below every dialect, so
// that each dialect's request, tools and remote modules share it without
// importing one another, and without a copy per dialect.
import { LlmgwError } from '../../errors/index.js';

/** A JSON object as parsed. */
export type Json = Record<string, unknown>;

/** LLMGW_BAD_REQUEST naming `param` (the top-level field), with a message that says what to send instead. */
export function bad(param: string, message: string): LlmgwError {
  return new LlmgwError('LLMGW_BAD_REQUEST', message, { context: { param } });
}

export function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
