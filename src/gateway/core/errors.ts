// OpenAI's error shape for the client listener. Every refusal the router makes
// (and every one Fastify makes on its behalf: 413, bad JSON) reaches clients
// in the one shape the official SDKs parse, so a user's `except
// openai.RateLimitError` works against llmgw exactly as against OpenAI.
import type { FastifyReply } from 'fastify';
import type { ServerResponse } from 'node:http';
import type { ErrorShaper } from '../../http/index.js';
import { openAiErrorCode, openAiErrorType, type ErrorCode } from '../../errors/index.js';

export { openAiErrorType };

function errorObject(message: string, code: string, status: number, param: string | null) {
  return { error: { message, type: openAiErrorType(status), param, code: openAiErrorCode(code), llmgw_code: code } };
}

export function openAiErrorBody(message: string, code: ErrorCode, status: number, param: string | null = null): string {
  return JSON.stringify(errorObject(message, code, status, param));
}

/** For `createJsonApp({shapeError})` on the client listener, so Fastify's own refusals read the same. */
export const openAiErrorShape: ErrorShaper = (e) => errorObject(e.message, e.code, e.status, e.param ?? null);

/** A refusal sent through Fastify (before the reply is hijacked), in OpenAI's shape. */
export function replyError(
  reply: FastifyReply,
  status: number,
  code: ErrorCode,
  message: string,
  param: string | null = null,
  headers: Record<string, string> = {},
): FastifyReply {
  return replyErrorBody(reply, status, openAiErrorBody(message, code, status, param), headers);
}

/** An error body (in the client's dialect) sent through Fastify, before the reply is hijacked. */
export function replyErrorBody(
  reply: FastifyReply,
  status: number,
  body: string,
  headers: Record<string, string> = {},
): FastifyReply {
  return reply
    .code(status)
    .headers({ 'content-type': 'application/json; charset=utf-8', ...headers })
    .send(body);
}

/** A refusal written on the raw response (after hijack) in OpenAI's shape; a no-op once headers went out. */
export function writeError(
  res: ServerResponse,
  status: number,
  code: ErrorCode,
  message: string,
  headers: Record<string, string> = {},
): void {
  writeErrorBody(res, status, openAiErrorBody(message, code, status), headers);
}

/** An error body (in the client's dialect) written on the raw response; a no-op once headers went out. */
export function writeErrorBody(
  res: ServerResponse,
  status: number,
  body: string,
  headers: Record<string, string> = {},
): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    ...headers,
  });
  res.end(body);
}
