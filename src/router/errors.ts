// OpenAI's error shape for the client listener. Every refusal the router makes
// (and every one Fastify makes on its behalf: 413, bad JSON) reaches clients
// in the one shape the official SDKs parse, so a user's `except
// openai.RateLimitError` works against llmgw exactly as against OpenAI.
import type { FastifyReply } from 'fastify';
import type { ServerResponse } from 'node:http';
import type { ErrorShaper } from '../http/index.js';
import type { ErrorCode } from '../errors/index.js';

/** OpenAI's `type` for a status: what its SDKs and users expect to read. */
export function openAiErrorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 429) return 'rate_limit_error';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}

/**
 * OpenAI's `code` for the refusals it has one for, which clients branch on
 * (an SDK's retry on `rate_limit_exceeded`, a framework trimming history on
 * `context_length_exceeded`); llmgw's own code otherwise. llmgw's code is
 * always in `llmgw_code` beside it.
 */
const OPENAI_CODES: Partial<Record<string, string>> = {
  LLMGW_UNAUTHORIZED: 'invalid_api_key',
  LLMGW_MODEL_NOT_FOUND: 'model_not_found',
  LLMGW_RATE_LIMITED: 'rate_limit_exceeded',
  LLMGW_CONTEXT_LENGTH_EXCEEDED: 'context_length_exceeded',
};

function errorObject(message: string, code: string, status: number, param: string | null) {
  return { error: { message, type: openAiErrorType(status), param, code: OPENAI_CODES[code] ?? code, llmgw_code: code } };
}

export function openAiErrorBody(message: string, code: ErrorCode, status: number, param: string | null = null): string {
  return JSON.stringify(errorObject(message, code, status, param));
}

/** For `createJsonApp({shapeError})` on the client listener, so Fastify's own refusals read the same. */
export const openAiErrorShape: ErrorShaper = (e) => errorObject(e.message, e.code, e.status, null);

/** A refusal sent through Fastify (before the reply is hijacked). */
export function replyError(
  reply: FastifyReply,
  status: number,
  code: ErrorCode,
  message: string,
  param: string | null = null,
  headers: Record<string, string> = {},
): FastifyReply {
  return reply.code(status).headers({ 'content-type': 'application/json; charset=utf-8', ...headers }).send(openAiErrorBody(message, code, status, param));
}

/** A refusal written on the raw response (after hijack); a no-op once headers went out. */
export function writeError(res: ServerResponse, status: number, code: ErrorCode, message: string, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return;
  const body = openAiErrorBody(message, code, status);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body), ...headers });
  res.end(body);
}
