// The batch input's checks, table by table. Guards against a bad line that
// slips through to fail hours into a batch, and against a refusal that does
// not say which line to fix.
import { describe, expect, it } from 'vitest';
import type { LlmgwError } from '../../errors/index.js';
import { lineStarts, parseBatchInput, requestAt } from './input.js';
import { completionWindowMs } from './service.js';

const ok = (id: string, url = '/v1/chat/completions', body: unknown = { model: 'm', messages: [] }) =>
  JSON.stringify({ custom_id: id, method: 'POST', url, body });

function refusal(text: string, maxLines = 100, endpoint?: string): LlmgwError {
  try {
    parseBatchInput(Buffer.from(text), maxLines, endpoint);
  } catch (err) {
    return err as LlmgwError;
  }
  throw new Error('accepted');
}

describe('parseBatchInput', () => {
  it('takes good lines, skipping blank ones but counting them', () => {
    const parsed = parseBatchInput(
      Buffer.from(`${ok('a')}\n\n${ok('b', '/v1/embeddings', { model: 'e', input: 'x' })}\n`),
      10,
    );
    expect(parsed.lines).toEqual([
      { line: 1, customId: 'a', model: 'm' },
      { line: 3, customId: 'b', model: 'e' },
    ]);
    expect(parsed.url, 'two endpoints: no one url').toBeNull();
  });

  it.each([
    ['not json', `${ok('a')}\n{nope`, 'line 2', 'not JSON'],
    ['an array', '[1]', 'line 1', 'not a JSON object'],
    [
      'no custom_id',
      JSON.stringify({ method: 'POST', url: '/v1/embeddings', body: { model: 'm' } }),
      'line 1',
      'custom_id',
    ],
    ['a repeated custom_id', `${ok('a')}\n${ok('a')}`, 'line 2', 'earlier line'],
    [
      'GET',
      JSON.stringify({ custom_id: 'a', method: 'GET', url: '/v1/embeddings', body: { model: 'm' } }),
      'line 1',
      'method',
    ],
    ['another url', ok('a', '/v1/images/generations'), 'line 1', 'url must be one of'],
    [
      'a string body',
      JSON.stringify({ custom_id: 'a', method: 'POST', url: '/v1/embeddings', body: 'x' }),
      'line 1',
      'body must be',
    ],
    ['no model', ok('a', '/v1/chat/completions', { messages: [] }), 'line 1', 'body.model'],
    ['stream', ok('a', '/v1/chat/completions', { model: 'm', stream: true }), 'line 1', 'stream'],
  ])('refuses %s with a 400 naming the line', (_what, text, line, words) => {
    const err = refusal(text);
    expect(err.code).toBe('LLMGW_BATCH_INPUT_INVALID');
    expect(err.status).toBe(400);
    expect(err.message).toContain(line);
    expect(err.message).toContain(words);
  });

  it('refuses a line whose url is not the batch endpoint, at create', () => {
    expect(refusal(`${ok('a')}\n${ok('b', '/v1/embeddings')}`, 10, '/v1/chat/completions').message).toContain('line 2');
  });

  it('refuses past batch_max_lines with a 413, and an empty file with a 400', () => {
    expect(refusal(`${ok('a')}\n${ok('b')}\n${ok('c')}`, 2)).toMatchObject({
      status: 413,
      code: 'LLMGW_BODY_TOO_LARGE',
    });
    expect(refusal('\n\n')).toMatchObject({ status: 400 });
  });

  it('finds a line again by its number for the runner', () => {
    const text = `${ok('a')}\n\n${ok('b', '/v1/embeddings', { model: 'e', input: 'x' })}\n`;
    expect(requestAt(text, lineStarts(text), 3)).toEqual({ url: '/v1/embeddings', body: { model: 'e', input: 'x' } });
  });
});

describe('completionWindowMs', () => {
  it('takes 24h, and shorter windows only down to batch_min_completion_window', () => {
    expect(completionWindowMs('24h', 86_400_000)).toBe(86_400_000);
    expect(() => completionWindowMs('1h', 86_400_000)).toThrow(/must be "24h"/);
    expect(completionWindowMs('2s', 1000)).toBe(2000);
    expect(() => completionWindowMs('48h', 1000)).toThrow(/completion_window/);
    expect(() => completionWindowMs(24, 1000)).toThrow(/completion_window/);
  });
});
