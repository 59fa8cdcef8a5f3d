// The prompt's least and most tokens, table-tested. The failure mostPromptTokens
// guards against: a hard budget held only a lower bound of each prompt (one
// token per 16 bytes), so 200 streams in flight at a budget's edge each spent
// ~6 tokens past their hold and a CI trial charged 21,022 of a 20,000 budget,
// 2.56 leases over where the bound is one lease per control plane.
import { describe, expect, it } from 'vitest';
import type { Endpoint } from '../ports/endpoints.js';
import {
  INPUT_SPECIAL_TOKENS,
  leastPromptTokens,
  MEDIA_PART_TOKENS,
  MESSAGE_TOKENS,
  mostPromptTokens,
  TEMPLATE_TOKENS,
  TOOL_CALL_TOKENS,
  TOOLS_PREAMBLE_TOKENS,
} from './prompt-text.js';

const bytes = (s: string) => Buffer.byteLength(s);
/** JSON as prompt-text counts it: its bytes and 4 per structural character. */
const json = (v: unknown) => {
  const t = JSON.stringify(v);
  return bytes(t) + 4 * (t.match(/[{}[\],:]/g)?.length ?? 0);
};
const chat = (...messages: unknown[]) => ({ model: 'm', messages });
const CJK = '東京の天気はどうですか？今日は晴れです。';
const CODE = 'function f(x) {\n    return x.map((y) => y * 2);\n}\n';
const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'The weather in a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    },
  },
];
const CALLS = [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }];

const cases: [string, Endpoint, Record<string, unknown>, number][] = [
  [
    'plain text: its bytes, the role, a message allowance and the template',
    'chat',
    chat({ role: 'user', content: 'Spend the budget, please.' }),
    TEMPLATE_TOKENS + MESSAGE_TOKENS + bytes('user') + bytes('Spend the budget, please.'),
  ],
  [
    'CJK: UTF-8 bytes (3 a character), not characters',
    'chat',
    chat({ role: 'user', content: CJK }),
    TEMPLATE_TOKENS + MESSAGE_TOKENS + 4 + bytes(CJK),
  ],
  [
    'code, whitespace and all',
    'chat',
    chat({ role: 'user', content: CODE }),
    TEMPLATE_TOKENS + MESSAGE_TOKENS + 4 + bytes(CODE),
  ],
  [
    'text parts, a name, a system message',
    'chat',
    chat(
      { role: 'system', content: 'Be terse.' },
      { role: 'user', name: 'ann', content: [{ type: 'text', text: 'Tell me about rivers.' }] },
    ),
    TEMPLATE_TOKENS +
      2 * MESSAGE_TOKENS +
      bytes('system') +
      bytes('Be terse.') +
      4 +
      3 +
      4 +
      bytes('Tell me about rivers.'),
  ],
  [
    'tools: their definitions as JSON, with the preamble',
    'chat',
    { ...chat({ role: 'user', content: 'hi' }), tools: TOOLS },
    TEMPLATE_TOKENS + MESSAGE_TOKENS + 4 + 2 + TOOLS_PREAMBLE_TOKENS + json(TOOLS),
  ],
  [
    "tool calls and a tool's answer: the calls as JSON with their wrapping, the answer's id and content",
    'chat',
    chat(
      { role: 'assistant', content: null, tool_calls: CALLS },
      { role: 'tool', tool_call_id: 'call_1', content: '18 °C' },
    ),
    TEMPLATE_TOKENS +
      2 * MESSAGE_TOKENS +
      bytes('assistant') +
      TOOL_CALL_TOKENS +
      json(CALLS) +
      bytes('tool') +
      bytes('call_1') +
      bytes('18 °C'),
  ],
  [
    "an image: a fixed allowance, not its base64's bytes",
    'chat',
    chat({
      role: 'user',
      content: [
        { type: 'text', text: 'What is this?' },
        { type: 'image_url', image_url: { url: `data:image/png;base64,${'A'.repeat(100_000)}` } },
      ],
    }),
    TEMPLATE_TOKENS + MESSAGE_TOKENS + 4 + 4 + bytes('What is this?') + MEDIA_PART_TOKENS,
  ],
  [
    'audio: the same allowance',
    'chat',
    chat({
      role: 'user',
      content: [{ type: 'input_audio', input_audio: { data: 'UklGR'.repeat(9000), format: 'wav' } }],
    }),
    TEMPLATE_TOKENS + MESSAGE_TOKENS + 4 + MEDIA_PART_TOKENS,
  ],
  [
    "Anthropic's Messages, as the chat it was translated to: the system prompt is a message",
    'messages',
    chat({ role: 'system', content: 'Be terse.' }, { role: 'user', content: 'hi' }),
    TEMPLATE_TOKENS + 2 * MESSAGE_TOKENS + 6 + 9 + 4 + 2,
  ],
  [
    'the Responses API, as its chat: instructions are a system message',
    'responses',
    chat({ role: 'system', content: 'Be terse.' }, { role: 'user', content: 'hi' }),
    TEMPLATE_TOKENS + 2 * MESSAGE_TOKENS + 6 + 9 + 4 + 2,
  ],
  [
    'a completion: its bytes and special tokens',
    'completions',
    { prompt: 'Once upon a time' },
    16 + INPUT_SPECIAL_TOKENS,
  ],
  ['a completion of token ids: one each', 'completions', { prompt: [101, 2023, 2003] }, 3 + INPUT_SPECIAL_TOKENS],
  [
    'a completion of several prompts: each with its special tokens',
    'completions',
    { prompt: ['ab', [1, 2]] },
    2 + 2 + 2 * INPUT_SPECIAL_TOKENS,
  ],
  ['a completion with a suffix (fill in the middle)', 'completions', { prompt: 'def f(', suffix: '):' }, 6 + 4 + 2],
  ['an embedding of one string', 'embeddings', { input: CJK }, bytes(CJK) + INPUT_SPECIAL_TOKENS],
  ['an embedding of many', 'embeddings', { input: ['a', 'bcd'] }, 4 + 2 * INPUT_SPECIAL_TOKENS],
  ['an embedding of token-id lists', 'embeddings', { input: [[1, 2], [3]] }, 3 + 2 * INPUT_SPECIAL_TOKENS],
  [
    'rerank: the query once with every document',
    'rerank',
    { query: 'sea', documents: ['salt water', 'rivers'] },
    2 * 3 + 10 + 6 + 2 * INPUT_SPECIAL_TOKENS,
  ],
  ['score, one against many', 'score', { text_1: 'sea', text_2: ['a', 'bb'] }, 2 * 3 + 3 + 2 * INPUT_SPECIAL_TOKENS],
  ['score, pairs in order', 'score', { text_1: ['a', 'bb'], text_2: ['c', 'dd'] }, 6 + 2 * INPUT_SPECIAL_TOKENS],
  ["score, SGLang's query and items", 'score', { query: 'q', items: ['a', 'b'] }, 2 + 2 + 2 * INPUT_SPECIAL_TOKENS],
  ['tokenize: charged nothing, holds nothing', 'tokenize', { prompt: 'hello' }, 0],
  ['transcriptions: the audio is not seen before the engine', 'transcriptions', { model: 'w' }, 0],
];

describe('the most tokens a prompt can be', () => {
  for (const [name, endpoint, body, expected] of cases)
    it(name, () => {
      expect(mostPromptTokens(endpoint, body)).toBe(expected);
    });

  it('is never less than the least, on every case', () => {
    for (const [name, endpoint, body] of cases)
      expect(mostPromptTokens(endpoint, body), name).toBeGreaterThanOrEqual(leastPromptTokens(endpoint, body));
  });

  it("bounds the sim engine's count (a token per 4 characters) and a byte-level BPE's (at most a token per byte)", () => {
    for (const text of ['Spend the budget, please.', CJK, CODE, 'x'.repeat(5000)]) {
      const most = mostPromptTokens('chat', chat({ role: 'user', content: text }));
      expect(most).toBeGreaterThanOrEqual(Math.ceil(text.length / 4));
      expect(most).toBeGreaterThanOrEqual(bytes(text));
    }
  });

  it('counts what is nested past any depth a chat has, rather than dropping it', () => {
    let deep: unknown = 'leaf text';
    for (let i = 0; i < 40; i++) deep = [deep];
    expect(mostPromptTokens('chat', chat({ role: 'user', content: deep }))).toBeGreaterThan(bytes('leaf text'));
  });

  it('counts an empty or absent prompt as the template alone, or nothing', () => {
    expect(mostPromptTokens('chat', { model: 'm' })).toBe(TEMPLATE_TOKENS);
    expect(mostPromptTokens('embeddings', { model: 'm' })).toBe(0);
    expect(mostPromptTokens('completions', { prompt: '' })).toBe(INPUT_SPECIAL_TOKENS);
  });
});
