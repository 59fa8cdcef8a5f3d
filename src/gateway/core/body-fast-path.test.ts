// Guards against the plain checks vouching for a body the endpoint's schema
// refuses: such a body would then reach an engine unchecked, where before it
// got the schema's 400. Every body here is run through both.
import { describe, expect, it } from 'vitest';
import { BODY_SCHEMAS } from './body-schemas.js';
import { PLAIN_BODY } from './body-fast-path.js';

const chat = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };

/** Bodies with the verdict the plain check must give; the schema's own verdict is checked beside it. */
const CASES: [string, keyof typeof PLAIN_BODY, Record<string, unknown>, boolean][] = [
  ['a plain chat', 'chat', chat, true],
  [
    'every generation field set',
    'chat',
    { ...chat, n: 2, max_tokens: 16, max_completion_tokens: 8, stream: true, stream_options: { include_usage: false } },
    true,
  ],
  [
    'nulls for the optional fields',
    'chat',
    { ...chat, n: null, max_tokens: null, stream: null, stream_options: null },
    true,
  ],
  ['extra fields (engines take many)', 'chat', { ...chat, temperature: 0.2, tools: [] }, true],
  ['no model', 'chat', { messages: chat.messages }, false],
  ['an empty model', 'chat', { ...chat, model: '' }, false],
  ['a numeric model', 'chat', { ...chat, model: 3 }, false],
  ['no messages', 'chat', { model: 'm' }, false],
  ['empty messages', 'chat', { ...chat, messages: [] }, false],
  ['a message without a role', 'chat', { ...chat, messages: [{ content: 'hi' }] }, false],
  ['a message that is a list', 'chat', { ...chat, messages: [['user']] }, false],
  ['a message that is null', 'chat', { ...chat, messages: [null] }, false],
  ['max_tokens 0', 'chat', { ...chat, max_tokens: 0 }, false],
  ['max_tokens 1.5', 'chat', { ...chat, max_tokens: 1.5 }, false],
  ['max_tokens as a string', 'chat', { ...chat, max_tokens: '16' }, false],
  ['max_tokens past 2^53', 'chat', { ...chat, max_tokens: 2 ** 60 }, false],
  ['n negative', 'chat', { ...chat, n: -1 }, false],
  ['stream as a string', 'chat', { ...chat, stream: 'true' }, false],
  ['stream_options a list', 'chat', { ...chat, stream_options: [true] }, false],
  ['include_usage a string', 'chat', { ...chat, stream_options: { include_usage: 'yes' } }, false],
  ['a Messages body (translated to chat)', 'messages', chat, true],
  ['a Responses body (translated to chat)', 'responses', { ...chat, stream: false }, true],
  ['a completion of text', 'completions', { model: 'm', prompt: 'once' }, true],
  ['a completion of texts', 'completions', { model: 'm', prompt: ['a', 'b'] }, true],
  ['a completion of token ids', 'completions', { model: 'm', prompt: [1, 2, 3] }, true],
  ['a completion of batches of ids', 'completions', { model: 'm', prompt: [[1, 2], [3]] }, true],
  ['a completion of an empty list', 'completions', { model: 'm', prompt: [] }, true],
  ['a completion mixing text and ids', 'completions', { model: 'm', prompt: ['a', 1] }, false],
  ['a completion of batches holding text', 'completions', { model: 'm', prompt: [[1], ['a']] }, false],
  ['a completion with no prompt', 'completions', { model: 'm' }, false],
  ['a completion with max_tokens 0', 'completions', { model: 'm', prompt: 'x', max_tokens: 0 }, false],
  ['an embedding of text', 'embeddings', { model: 'm', input: 'x' }, true],
  ['an embedding of ids', 'embeddings', { model: 'm', input: [[1], [2, 3]] }, true],
  ['an embedding of an object', 'embeddings', { model: 'm', input: { text: 'x' } }, false],
  ['an embedding with no model', 'embeddings', { input: 'x' }, false],
];

describe('the plain body checks', () => {
  it.each(CASES)('%s: %s', (_name, endpoint, body, plain) => {
    const check = PLAIN_BODY[endpoint]!;
    expect(check(body)).toBe(plain);
    // Whatever the plain check vouches for, the schema accepts: it only ever skips a parse that would have passed.
    if (plain) expect(BODY_SCHEMAS[endpoint].safeParse(body).success).toBe(true);
  });

  it('vouches for nothing on the endpoints it has no check for', () => {
    for (const e of ['rerank', 'score', 'tokenize', 'detokenize', 'transcriptions'] as const)
      expect(PLAIN_BODY[e]).toBeUndefined();
  });
});
