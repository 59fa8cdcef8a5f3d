// GET /v1/models and /v1/models/{id} in Anthropic's Models API shape. The
// paths are OpenAI's too, and the OpenAI dialect owns their routes; a
// request that carries `anthropic-version` (every Anthropic SDK sends it,
// no OpenAI client does) is answered here instead, its refusals in
// Anthropic's error shape. Pure: the entries in, the page out.
import type { FastifyRequest } from 'fastify';
import { LlmgwError } from '../../../errors/index.js';

/** One model as Anthropic's Models API describes it. */
export interface AnthropicModelInfo {
  readonly type: 'model';
  readonly id: string;
  readonly display_name: string;
  /** RFC 3339; llmgw's: when the gateway started, as OpenAI's `created` says. */
  readonly created_at: string;
}

/** A page of the list; first_id and last_id are null on an empty page. */
export interface AnthropicModelPage {
  readonly data: AnthropicModelInfo[];
  readonly has_more: boolean;
  readonly first_id: string | null;
  readonly last_id: string | null;
}

/** Anthropic's own page size when the client names none, and its largest. */
const DEFAULT_LIMIT = 20;
const MAX_LIMIT = 1000;

/** Whether a request to the models routes is from an Anthropic client, to be answered in its shape. */
export function asksAnthropicModels(request: FastifyRequest): boolean {
  return request.headers['anthropic-version'] !== undefined;
}

export function anthropicModelInfo(id: string, createdS: number): AnthropicModelInfo {
  return {
    type: 'model',
    id,
    // llmgw has no other name for a model than the one clients send.
    display_name: id,
    created_at: new Date(createdS * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z'),
  };
}

/**
 * One page of `ids` (in the order the catalog lists them), as Anthropic
 * pages: `limit` entries (20 when absent, 1 to 1000), those after
 * `after_id` or before `before_id` (not both); has_more says whether any
 * lie beyond the page in the direction read. A cursor that names no model
 * in the list, or a limit out of range, throws LLMGW_BAD_REQUEST naming the
 * parameter.
 */
export function anthropicModelPage(ids: readonly string[], createdS: number, query: unknown): AnthropicModelPage {
  const q = (typeof query === 'object' && query !== null ? query : {}) as Record<string, unknown>;
  let limit = DEFAULT_LIMIT;
  if (q.limit !== undefined) {
    limit = Number(q.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT)
      throw bad(`limit: want an integer from 1 to ${MAX_LIMIT}, got ${JSON.stringify(q.limit)}`);
  }
  const cursor = (name: 'after_id' | 'before_id'): number | null => {
    const v = q[name];
    if (v === undefined) return null;
    const at = typeof v === 'string' ? ids.indexOf(v) : -1;
    if (at < 0) throw bad(`${name}: ${JSON.stringify(v)} is not a model this key may use; GET /v1/models lists them`);
    return at;
  };
  const after = cursor('after_id');
  const before = cursor('before_id');
  if (after !== null && before !== null) throw bad('send after_id or before_id, not both');
  let start: number;
  let end: number;
  let hasMore: boolean;
  if (before !== null) {
    end = before;
    start = Math.max(0, end - limit);
    hasMore = start > 0;
  } else {
    start = after === null ? 0 : after + 1;
    end = Math.min(ids.length, start + limit);
    hasMore = end < ids.length;
  }
  const data = ids.slice(start, end).map((id) => anthropicModelInfo(id, createdS));
  return {
    data,
    has_more: hasMore,
    first_id: data.length ? data[0]!.id : null,
    last_id: data.length ? data[data.length - 1]!.id : null,
  };
}

function bad(message: string): LlmgwError {
  return new LlmgwError('LLMGW_BAD_REQUEST', message);
}
