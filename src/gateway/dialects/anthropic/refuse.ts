// The 400 every step of a Messages request's translation throws, naming the
// field, and the JSON object test they all need. Its own file so that
// request.ts, tools.ts and the remote direction (remote-request.ts) share
// them without importing one another.
import { LlmgwError } from '../../../errors/index.js';

/** A JSON object as parsed. */
export type Json = Record<string, unknown>;

/** LLMGW_BAD_REQUEST naming `param` (the top-level field), with a message that says what to send instead. */
export function bad(param: string, message: string): LlmgwError {
  return new LlmgwError('LLMGW_BAD_REQUEST', message, { context: { param } });
}

export function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
