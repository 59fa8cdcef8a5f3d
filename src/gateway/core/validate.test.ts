import { describe, expect, it } from 'vitest';
import { isLlmgwError } from '../../errors/index.js';
import { TailKeeper, usageFromTail } from './usage.js';
import { checkModelLimits, parseFormRequest, parseRequest } from './validate.js';
import { promptPrefix } from './prompt-text.js';

const limits = { maxN: 16, maxTokens: 1000 };
const chat = (extra: Record<string, unknown>) =>
  Buffer.from(
    JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'see https://example.com' }], ...extra }),
  );

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
      response_format: {
        type: 'json_schema',
        json_schema: { name: 'x', schema: { $schema: 'http://json-schema.org/draft-07/schema#' } },
      },
      tools: [{ type: 'function', function: { name: 'f', description: 'fetches https://api.example.com' } }],
    });
    expect(parseRequest('chat', body, limits).model).toBe('m');
  });

  it('refuses any field that could redirect the request, at the top or nested outside content', () => {
    expect(refusal(() => parseRequest('chat', chat({ base_url: 'x' }), limits))).toMatch(
      /^400 base_url: llmgw chooses where a request goes/,
    );
    expect(refusal(() => parseRequest('chat', chat({ extra_body: { api_base: 'x' } }), limits))).toContain(
      'extra_body.api_base',
    );
    expect(
      refusal(() => parseRequest('chat', chat({ routing_hints: { callback: 'http://10.0.0.1:8000/x' } }), limits)),
    ).toContain('routing_hints.callback');
    expect(refusal(() => parseRequest('chat', chat({ user: 'localhost:8000' }), limits))).toMatch(
      /^400 user: a URL is not accepted/,
    );
    expect(
      refusal(() =>
        parseRequest('completions', Buffer.from('{"model":"m","prompt":"p","user":"//evil.example/x"}'), limits),
      ),
    ).toContain('user');
  });

  it('lets through what OpenAI and vLLM accept: URLs in tags, predictions, documents and guided choices, addresses as user ids, a nested key named endpoint', () => {
    const body = chat({
      user: '10.0.0.5',
      safety_identifier: '192.168.1.7',
      metadata: { endpoint: 'checkout', source: 'https://shop.example/cart' },
      prediction: { type: 'content', content: 'see https://example.com/docs' },
      documents: [{ title: 'a', url: 'https://example.com/a' }],
      guided_choice: ['https://a.example', 'https://b.example'],
      structured_outputs: { choice: ['http://x.example'] },
      chat_template_kwargs: { host: 'docs.example.com' },
      vendor_options: { endpoint: 'fast', region: 'eu' },
    });
    expect(parseRequest('chat', body, limits).model).toBe('m');
  });

  it('names the field that is wrong and the limit that was passed', () => {
    expect(refusal(() => parseRequest('chat', Buffer.from('{"model":"m"}'), limits))).toContain('messages');
    expect(refusal(() => parseRequest('chat', chat({ max_tokens: 5000 }), limits))).toContain(
      'max_tokens: 5000 is more than this server allows (1000)',
    );
    expect(refusal(() => parseRequest('chat', chat({ n: 0 }), limits))).toContain('n');
    expect(refusal(() => parseRequest('embeddings', Buffer.from('{"model":"m"}'), limits))).toContain('input');
    expect(refusal(() => parseRequest('chat', Buffer.from('[1]'), limits))).toContain('JSON object');
    expect(refusal(() => parseRequest('chat', Buffer.from('{'), limits))).toContain('not valid JSON');
  });

  it('hashes the start of the conversation for prefix routing', () => {
    const body = {
      messages: [
        { role: 'system', content: 'abc' },
        { role: 'user', content: [{ type: 'text', text: 'def' }] },
      ],
    };
    expect(promptPrefix(body, 100)).toBe('abc\ndef\n');
    expect(promptPrefix({ prompt: 'hello world' }, 5)).toBe('hello');
  });
});

describe('usage from the end of an answer', () => {
  it("reads the engine's usage object, not a lookalike inside generated text", () => {
    const tail =
      '{"choices":[{"text":"\\"usage\\":{\\"prompt_tokens\\": 999"}],"usage":{"prompt_tokens":12,"completion_tokens":34,"total_tokens":46}}';
    expect(usageFromTail(tail)).toEqual({ promptTokens: 12, completionTokens: 34 });
    expect(usageFromTail('data: {"choices":[]}\n\ndata: [DONE]\n\n')).toBeNull();
  });
});

describe('a model’s own limits', () => {
  const limits = { contextTokens: 4096, maxTokens: 1024, maxN: 4 };
  const parsed = (endpoint: 'chat' | 'completions' | 'embeddings', body: Record<string, unknown>) =>
    parseRequest(endpoint, Buffer.from(JSON.stringify({ model: 'm', ...body })), { maxN: 128, maxTokens: 1_000_000 });
  const check = (endpoint: 'chat' | 'completions' | 'embeddings', body: Record<string, unknown>) => () =>
    checkModelLimits(endpoint, parsed(endpoint, body), 'm', limits);
  const chat = (content: unknown, extra: Record<string, unknown> = {}) => ({
    messages: [{ role: 'user', content }],
    ...extra,
  });

  it('lets through what fits', () => {
    expect(check('chat', chat('hello', { max_tokens: 1024, n: 4 }))).not.toThrow();
    expect(check('completions', { prompt: [1, 2, 3], max_tokens: 10 })).not.toThrow();
    // 4096 × 4 bytes of English is about 4096 tokens: not certainly too long, so the engine decides.
    expect(check('chat', chat('word '.repeat(3000)))).not.toThrow();
    expect(() =>
      checkModelLimits('chat', parsed('chat', chat('x'.repeat(1e6))), 'm', {
        contextTokens: null,
        maxTokens: null,
        maxN: null,
      }),
    ).not.toThrow();
  });

  it('refuses n and max_tokens beyond the model, naming the field', () => {
    expect(check('chat', chat('hi', { n: 5 }))).toThrow(/^n: 5 is more than model `m` allows \(4\)$/);
    expect(check('chat', chat('hi', { max_tokens: 2000 }))).toThrow(
      /max_tokens: 2000 is more than model `m` allows \(1024\)/,
    );
    expect(() =>
      checkModelLimits('chat', parsed('chat', chat('hi', { max_completion_tokens: 4096 })), 'm', {
        ...limits,
        maxTokens: null,
      }),
    ).toThrow(
      /^This model's maximum context length is 4096 tokens, and max_completion_tokens asks for 4096, which leaves no room/,
    );
  });

  it('refuses a prompt that cannot fit the context, counting text parts and token ids', () => {
    // OpenAI's words and code, which clients and frameworks recognise an overflow by.
    expect(check('chat', chat('x'.repeat(16 * 5000)))).toThrow(
      /^This model's maximum context length is 4096 tokens\. However, you requested at least 5000 tokens \(at least 5000 in the messages\); send a shorter prompt/,
    );
    expect(check('chat', chat('x'.repeat(16 * 5000)))).toThrow(
      expect.objectContaining({ code: 'LLMGW_CONTEXT_LENGTH_EXCEEDED', context: { param: 'messages' } }),
    );
    expect(check('chat', chat([{ type: 'text', text: 'x'.repeat(16 * 4000) }], { max_tokens: 200 }))).toThrow(
      /at least 4200 tokens \(at least 4000 in the messages, 200 for the completion\)/,
    );
    expect(check('completions', { prompt: Array.from({ length: 5000 }, (_, i) => i) })).toThrow(
      /at least 5000 in the prompt/,
    );
    expect(check('embeddings', { input: ['y'.repeat(16 * 4097)] })).toThrow(/at least 4097 in the input/);
  });
});

describe('pass-through endpoints: enough checked to route, the rest left to the engine', () => {
  const json = (o: unknown) => Buffer.from(JSON.stringify(o));

  it('accepts the bodies vLLM, llama.cpp and SGLang take, with extra fields', () => {
    expect(
      parseRequest(
        'rerank',
        json({ model: 'r', query: 'q', documents: ['a', { text: 'b' }], top_n: 1, return_documents: true }),
        limits,
      ).model,
    ).toBe('r');
    expect(parseRequest('score', json({ model: 's', text_1: 'a', text_2: ['b', 'c'] }), limits).model, "vLLM's").toBe(
      's',
    );
    expect(
      parseRequest('score', json({ model: 's', query: 'a', items: ['b'], label_token_ids: [1] }), limits).model,
      "SGLang's",
    ).toBe('s');
    expect(parseRequest('tokenize', json({ model: 't', prompt: 'hi', add_special_tokens: false }), limits).model).toBe(
      't',
    );
    expect(parseRequest('tokenize', json({ model: 't', content: 'hi' }), limits).model, "llama.cpp's").toBe('t');
    expect(
      parseRequest('tokenize', json({ model: 't', messages: [{ role: 'user', content: 'hi' }] }), limits).model,
      'chat messages',
    ).toBe('t');
    expect(parseRequest('detokenize', json({ model: 't', tokens: [1, 2, 3] }), limits).model).toBe('t');
  });

  it('refuses a body it cannot route or the engine would refuse, naming the field', () => {
    expect(refusal(() => parseRequest('rerank', json({ model: 'r', documents: ['a'] }), limits))).toMatch(
      /^400 query: want the query as a string/,
    );
    expect(refusal(() => parseRequest('rerank', json({ model: 'r', query: 'q', documents: [] }), limits))).toContain(
      'documents: want at least one document',
    );
    expect(refusal(() => parseRequest('score', json({ model: 's', text_1: 'a' }), limits))).toContain(
      'want text_1 and text_2 (vLLM), or query and items (SGLang)',
    );
    expect(refusal(() => parseRequest('tokenize', json({ model: 't' }), limits))).toContain(
      'want the text as prompt (vLLM) or content (llama.cpp), or chat messages',
    );
    expect(refusal(() => parseRequest('detokenize', json({ model: 't', tokens: [1.5] }), limits))).toContain(
      'tokens[0]: want whole token ids',
    );
    expect(
      refusal(() => parseRequest('tokenize', json({ prompt: 'x' }), limits)),
      'a model is named in the body',
    ).toMatch(/^400 model: want the model name/);
  });

  it('reads a transcription form: a model and a file, `stream` as a boolean', () => {
    const file = new Map([['file', { filename: 'a.wav', sizeBytes: 10, bytes: null }]]);
    const parsed = parseFormRequest(
      'transcriptions',
      { fields: { model: 'whisper', stream: 'true', response_format: 'text' }, files: file },
      limits,
    );
    expect([parsed.model, parsed.stream, parsed.body.response_format, parsed.usageWithheld]).toEqual([
      'whisper',
      true,
      'text',
      false,
    ]);
    expect(
      refusal(() => parseFormRequest('transcriptions', { fields: { model: 'whisper' }, files: new Map() }, limits)),
    ).toContain('the form has no file field; send the audio as a file part named "file"');
    expect(refusal(() => parseFormRequest('transcriptions', { fields: {}, files: file }, limits))).toContain(
      'the form has no model field; add one',
    );
  });

  it('holds rerank and score to no context (each pair is its own sequence), and reserves their text', () => {
    const parsed = parseRequest(
      'rerank',
      json({ model: 'r', query: 'q'.repeat(16 * 10), documents: ['d'.repeat(16 * 5000)] }),
      limits,
    );
    expect(() =>
      checkModelLimits('rerank', parsed, 'r', { contextTokens: 4096, maxTokens: null, maxN: null }),
    ).not.toThrow();
    expect(parsed.leastPromptTokens()).toBe(5010);
  });
});

describe('usage from the kept bytes of an answer', () => {
  it("reads each API's own names: input/output tokens, and total_tokens alone as the prompt; seconds of audio are no tokens", () => {
    expect(
      usageFromTail(
        '{"output":[],"usage":{"input_tokens":7,"input_tokens_details":{"cached_tokens":0},"output_tokens":3}}',
      ),
    ).toEqual({ promptTokens: 7, completionTokens: 3 });
    expect(usageFromTail('{"results":[],"usage":{"total_tokens":18}}'), 'rerank').toEqual({
      promptTokens: 18,
      completionTokens: 0,
    });
    expect(usageFromTail('{"text":"hi","usage":{"type":"duration","seconds":3}}'), "vLLM's transcription").toBeNull();
  });

  const keep = (...parts: string[]) => {
    const t = new TailKeeper();
    for (const p of parts) t.push(Buffer.from(p));
    return t;
  };

  it('reads it as usageFromTail reads text: the last usage object, however spaced, even split across chunks', () => {
    const tail =
      '{"choices":[{"text":"\\"usage\\":{\\"prompt_tokens\\": 999"}],"usage":{"prompt_tokens":12,"completion_tokens":34,"total_tokens":46}}';
    expect(keep(tail.slice(0, 70), tail.slice(70)).usage()).toEqual({ promptTokens: 12, completionTokens: 34 });
    expect(
      keep(
        'data: {"choices":[],"usage": {"prompt_tokens": 5, "completion_tokens": 6}}\n\n',
        'data: [DONE]\n\n',
      ).usage(),
      "Python's spacing",
    ).toEqual({
      promptTokens: 5,
      completionTokens: 6,
    });
    expect(
      keep('data: {"choices":[{"delta":{}}],"usage":null}\n\n', 'data: [DONE]\n\n').usage(),
      '"usage": null on every chunk is no usage',
    ).toBeNull();
    expect(keep().usage(), 'nothing kept').toBeNull();
  });

  it("reads the Responses API's names from an engine that serves it natively, whole or in its last event", () => {
    const usage =
      '"usage":{"input_tokens":7,"input_tokens_details":{"cached_tokens":0},"output_tokens":9,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":16}';
    expect(keep(`{"object":"response","output":[],${usage},"user":null}`).usage()).toEqual({
      promptTokens: 7,
      completionTokens: 9,
    });
    expect(
      keep(
        'event: response.created\ndata: {"type":"response.created","response":{"usage":null}}\n\n',
        `event: response.completed\ndata: {"type":"response.completed","response":{${usage}}}\n\n`,
      ).usage(),
    ).toEqual({ promptTokens: 7, completionTokens: 9 });
  });
});
