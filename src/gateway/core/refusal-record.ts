// The request log's record of a request a limit refused at admission (a
// rate limit, a request over its key's token limit, a hard budget), so
// `ctl request ID` and the dashboard answer "why was this request refused"
// as they answer why one failed. Apart from request-log.ts because it reads
// the Fastify request the admission hooks filled in; a refusal in the
// fair-share queue is recorded by the attempt loop, which has the record.
import type { FastifyReply } from 'fastify';
import type { ErrorCode } from '../../errors/index.js';
import { newRecord, type RequestRecord } from './request-log.js';

/**
 * The limit a refusal's code names, in words a timeline quotes ("refused by
 * a limit (hard budget)"); absent = the code is not an admission limit's.
 */
export function admissionLimitOf(code: ErrorCode, limitedBy: 'requests' | 'tokens' | undefined): string | undefined {
  switch (code) {
    case 'LLMGW_BUDGET_EXCEEDED':
      return 'hard budget';
    case 'LLMGW_BUDGET_UNSETTLED':
      // Not spent: the lease ran dry and the store did not renew it in time.
      return 'hard budget, not settled with the store in time';
    case 'LLMGW_RATE_LIMITED':
      // The rate-limit hook says which bucket was short; a refusal it did not make names neither.
      return limitedBy === 'requests'
        ? 'requests per minute'
        : limitedBy === 'tokens'
          ? 'tokens per minute'
          : 'rate limit';
    case 'LLMGW_REQUEST_OVER_TOKEN_LIMIT':
      return "tokens per minute (the request alone is over the key's limit)";
    default:
      return undefined;
  }
}

/**
 * The record of a request refused by an admission limit: its model and key,
 * the limit, and what the client was told. Null for any other refusal (a
 * bad body, no key: those never reached a limit) and for one refused
 * before its call was parsed (no model to file it under).
 */
export function admissionRefusalRecord(
  reply: FastifyReply,
  status: number,
  code: ErrorCode,
  message: string,
  nowMs: number,
): RequestRecord | null {
  const call = reply.request.call;
  const limit = admissionLimitOf(code, call?.limitedBy);
  if (limit === undefined || !call) return null;
  const elapsed = reply.elapsedTime;
  const r = newRecord(reply.request.id, nowMs - elapsed, call.model.name, call.endpoint, call.parsed.stream, {
    key: reply.request.apiKey?.prefix,
    rule: call.rule,
    admittedMs: elapsed,
  });
  r.admission = { outcome: 'limited', doneMs: elapsed, limit };
  r.status = status;
  r.failure = { code, message };
  r.durationMs = elapsed;
  return r;
}
