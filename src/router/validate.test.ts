import { describe, expect, it } from 'vitest';
import { isLlmgwError } from '../errors/index.js';
import { isLoopbackHost } from './loopback.js';
import { usageFromTail } from './usage.js';
import { parseRequest, promptPrefix } from './validate.js';

const limits = { maxN: 16, maxTokens: 1000 };
const chat = (extra: Record<string, unknown>) =>
  Buffer.from(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'see https://example.com' }], ...extra }));

function refusal(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    if (isLlmgwError(err)) return `${err.status} ${err.message}`;
    throw err;
  }
  throw new Error('expected a refusal');
}

describe('request validation', () => {
  it('accepts URLs in content and schemas, where they are text', () => {
    const body = chat({
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { $schema: 'http://json-schema.org/draft-07/schema#' } } },
      tools: [{ type: 'function', function: { name: 'f', description: 'fetches https://api.example.com' } }],
    });
    expect(parseRequest('chat', body, limits).model).toBe('m');
  });

  it('refuses any field that could redirect the request, at the top or nested outside content', () => {
    expect(refusal(() => parseRequest('chat', chat({ base_url: 'x' }), limits))).toMatch(/^400 base_url: llmgw chooses where a request goes/);
    expect(refusal(() => parseRequest('chat', chat({ extra_body: { api_base: 'x' } }), limits))).toContain('extra_body.api_base');
    expect(refusal(() => parseRequest('chat', chat({ metadata: { callback: 'http://10.0.0.1:8000/x' } }), limits))).toContain('metadata.callback');
    expect(refusal(() => parseRequest('completions', Buffer.from('{"model":"m","prompt":"p","user":"//evil.example/x"}'), limits))).toContain('user');
  });

  it('names the field that is wrong and the limit that was passed', () => {
    expect(refusal(() => parseRequest('chat', Buffer.from('{"model":"m"}'), limits))).toContain('messages');
    expect(refusal(() => parseRequest('chat', chat({ max_tokens: 5000 }), limits))).toContain('max_tokens: 5000 is more than this server allows (1000)');
    expect(refusal(() => parseRequest('chat', chat({ n: 0 }), limits))).toContain('n');
    expect(refusal(() => parseRequest('embeddings', Buffer.from('{"model":"m"}'), limits))).toContain('input');
    expect(refusal(() => parseRequest('chat', Buffer.from('[1]'), limits))).toContain('JSON object');
    expect(refusal(() => parseRequest('chat', Buffer.from('{'), limits))).toContain('not valid JSON');
  });

  it('hashes the start of the conversation for prefix routing', () => {
    const body = { messages: [{ role: 'system', content: 'abc' }, { role: 'user', content: [{ type: 'text', text: 'def' }] }] };
    expect(promptPrefix(body, 100)).toBe('abc\ndef\n');
    expect(promptPrefix({ prompt: 'hello world' }, 5)).toBe('hello');
  });
});

describe('usage from the end of an answer', () => {
  it("reads the engine's usage object, not a lookalike inside generated text", () => {
    const tail = '{"choices":[{"text":"\\"usage\\":{\\"prompt_tokens\\": 999"}],"usage":{"prompt_tokens":12,"completion_tokens":34,"total_tokens":46}}';
    expect(usageFromTail(tail)).toEqual({ promptTokens: 12, completionTokens: 34 });
    expect(usageFromTail('data: {"choices":[]}\n\ndata: [DONE]\n\n')).toBeNull();
  });
});

describe('loopback check for running without keys', () => {
  it('accepts only loopback addresses', () => {
    for (const h of ['127.0.0.1', '127.1.2.3', '::1', '[::1]', 'localhost', '::ffff:127.0.0.1']) expect(isLoopbackHost(h), h).toBe(true);
    for (const h of ['0.0.0.0', '::', '10.0.0.1', 'example.com', '']) expect(isLoopbackHost(h), h).toBe(false);
  });
});
