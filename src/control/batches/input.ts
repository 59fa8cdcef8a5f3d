// What a batch input file must be, line by line: OpenAI's request lines
// ({custom_id, method, url, body}) for the endpoints llmgw runs batches of.
// Checked whole at upload (purpose `batch`) and again at POST /v1/batches
// (where the url must also be the batch's endpoint), so a bad line is a 400
// naming its number before anything runs, never a failure hours in. Pure:
// bytes in, lines or an LlmgwError out.
import { LlmgwError } from '../../errors/index.js';
import { BATCH_ENDPOINTS, type BatchEndpoint } from '../../gateway/index.js';
import type { NewLine } from './batch-store.js';

export function isBatchEndpoint(url: unknown): url is BatchEndpoint {
  return typeof url === 'string' && (BATCH_ENDPOINTS as readonly string[]).includes(url);
}

/** A checked input: its lines, and the one url they share (null when the lines name several). */
export interface BatchInput {
  readonly lines: readonly NewLine[];
  readonly url: BatchEndpoint | null;
}

function bad(line: number, what: string): LlmgwError {
  return new LlmgwError('LLMGW_BATCH_INPUT_INVALID', `line ${line} of the batch input: ${what}`, {
    status: 400,
    context: { line },
  });
}

/**
 * The input's lines, each checked; throws a 400 naming the first bad line,
 * or a 413 past `maxLines`. Blank lines (a trailing newline) are skipped
 * but counted, so a number given matches what an editor shows.
 * `endpoint`: every line's url must be it; absent = any batch endpoint.
 */
export function parseBatchInput(bytes: Buffer, maxLines: number, endpoint?: string): BatchInput {
  const text = bytes.toString('utf8');
  const lines: NewLine[] = [];
  const seen = new Set<string>();
  let url: BatchEndpoint | null = null;
  let mixed = false;
  let at = 0;
  let number = 0;
  while (at < text.length) {
    const end = text.indexOf('\n', at);
    const raw = text.slice(at, end === -1 ? text.length : end).trim();
    at = end === -1 ? text.length : end + 1;
    number += 1;
    if (raw === '') continue;
    if (lines.length >= maxLines)
      throw new LlmgwError(
        'LLMGW_BODY_TOO_LARGE',
        `the batch input has more than ${maxLines} requests (batch_max_lines); split it into several batches`,
        { status: 413 },
      );
    let value: unknown;
    try {
      value = JSON.parse(raw);
    } catch {
      throw bad(number, 'not JSON; each line is one request object, {"custom_id", "method", "url", "body"}');
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value))
      throw bad(number, 'not a JSON object; each line is {"custom_id", "method", "url", "body"}');
    const o = value as Record<string, unknown>;
    if (typeof o.custom_id !== 'string' || o.custom_id === '')
      throw bad(number, 'custom_id must be a non-empty string, unique in the file');
    if (seen.has(o.custom_id)) throw bad(number, `custom_id ${JSON.stringify(o.custom_id)} is used by an earlier line`);
    seen.add(o.custom_id);
    if (o.method !== 'POST') throw bad(number, `method must be "POST", not ${JSON.stringify(o.method ?? null)}`);
    if (!isBatchEndpoint(o.url))
      throw bad(number, `url must be one of ${BATCH_ENDPOINTS.join(', ')}, not ${JSON.stringify(o.url ?? null)}`);
    if (endpoint !== undefined && o.url !== endpoint)
      throw bad(number, `url ${o.url} is not the batch's endpoint ${endpoint}; a batch runs one endpoint`);
    if (url === null && !mixed) url = o.url;
    else if (url !== o.url) {
      mixed = true;
      url = null;
    }
    if (typeof o.body !== 'object' || o.body === null || Array.isArray(o.body))
      throw bad(number, 'body must be a JSON object: the request as the endpoint takes it');
    const body = o.body as Record<string, unknown>;
    if (typeof body.model !== 'string' || body.model === '') throw bad(number, 'body.model must name a model');
    if (body.stream === true) throw bad(number, 'body.stream must not be true: a batch answer is one whole response');
    lines.push({ line: number, customId: o.custom_id, model: body.model });
  }
  if (lines.length === 0)
    throw new LlmgwError('LLMGW_BATCH_INPUT_INVALID', 'the batch input has no request lines', { status: 400 });
  return { lines, url };
}

/** The line's request ({url, body}) from the input's bytes; the input was checked when the batch was made. */
export function requestAt(text: string, lineStarts: readonly number[], line: number): { url: string; body: unknown } {
  const start = lineStarts[line - 1]!;
  const end = text.indexOf('\n', start);
  const o = JSON.parse(text.slice(start, end === -1 ? text.length : end)) as { url: string; body: unknown };
  return { url: o.url, body: o.body };
}

/** Where each line starts in the text (index = line number - 1). */
export function lineStarts(text: string): number[] {
  const starts = [0];
  for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) starts.push(i + 1);
  return starts;
}
