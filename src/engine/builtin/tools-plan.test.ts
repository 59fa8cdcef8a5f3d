// The plans tools.ts and choices.ts make, without a model: which request
// fields combine, which schema a forced call is written under, and how n
// choices share one request's fate. (How a schema becomes a grammar is
// schema-grammar's, tested there.)
import { describe, expect, it } from 'vitest';
import { choiceSeed, runChoices } from './choices.js';
import { chatOutput, forcedCall, forcedCallSchema } from './tools.js';

const fn = (name: string, parameters?: Record<string, unknown>) => ({
  type: 'function' as const,
  function: { name, ...(parameters ? { parameters } : {}) },
});

describe('chatOutput', () => {
  it('decides text, JSON, auto tools or a forced call from the request', () => {
    expect(chatOutput({})).toEqual({ kind: 'text' });
    expect(chatOutput({ tools: [fn('a')], tool_choice: 'none' })).toEqual({ kind: 'text' });
    expect(chatOutput({ tools: [fn('a')] })).toMatchObject({ kind: 'tools', parallel: true });
    expect(chatOutput({ tools: [fn('a')], parallel_tool_calls: false })).toMatchObject({
      kind: 'tools',
      parallel: false,
    });
    expect(
      chatOutput({ tools: [fn('a'), fn('b')], tool_choice: { type: 'function', function: { name: 'b' } } }),
    ).toMatchObject({
      kind: 'forcedTool',
      tools: [{ name: 'b', parameters: { type: 'object', properties: {} }, param: 'tools[1].function.parameters' }],
    });
    expect(chatOutput({ response_format: { type: 'json_object' } })).toEqual({
      kind: 'json',
      schema: undefined,
      param: 'response_format',
    });
  });

  it('refuses contradictions and duplicates by the field to fix', () => {
    const refusal = (request: Parameters<typeof chatOutput>[0]) => {
      try {
        chatOutput(request);
      } catch (err) {
        return (err as { context: { param: string } }).context.param;
      }
      return 'accepted';
    };
    expect(refusal({ tools: [fn('a'), fn('a')] })).toBe('tools[1].function.name');
    expect(refusal({ tools: [fn('a')], response_format: { type: 'json_object' } })).toBe('response_format');
    expect(refusal({ tools: [fn('a')], tool_choice: 'none', response_format: { type: 'json_object' } })).toBe(
      'accepted',
    );
    expect(refusal({ tool_choice: 'required' })).toBe('tool_choice');
    // Regression: a forced call whose schema had a pattern (or a minimum, or a format) was refused; such keywords
    // are now enforced by the grammar, or checked after, so the plan takes them.
    expect(
      refusal({
        tools: [fn('a', { type: 'object', properties: { x: { type: 'string', pattern: 'x' } } })],
        tool_choice: 'required',
      }),
    ).toBe('accepted');
  });
});

describe('forced calls', () => {
  it('constrain one tool to its arguments, several to a name and its own arguments', () => {
    const a = { name: 'a', description: undefined, parameters: { type: 'boolean' }, param: 'tools[0]' };
    const b = { name: 'b', description: undefined, parameters: { type: 'null' }, param: 'tools[1]' };
    expect(forcedCallSchema([a])).toEqual({ type: 'boolean' });
    expect(forcedCallSchema([a, b])).toEqual({
      anyOf: [
        {
          type: 'object',
          properties: { name: { const: 'a' }, arguments: { type: 'boolean' } },
          required: ['name', 'arguments'],
          additionalProperties: false,
        },
        {
          type: 'object',
          properties: { name: { const: 'b' }, arguments: { type: 'null' } },
          required: ['name', 'arguments'],
          additionalProperties: false,
        },
      ],
    });
    expect(forcedCall([a], 'true')).toEqual({ name: 'a', arguments: 'true' });
    expect(forcedCall([a, b], '{"name": "b", "arguments": null}')).toEqual({ name: 'b', arguments: 'null' });
  });
});

describe('runChoices', () => {
  it('runs each choice with its index and returns them in order', async () => {
    const finish: (() => void)[] = [];
    const run = runChoices(
      3,
      new AbortController().signal,
      (i) => new Promise<number>((resolve) => (finish[i] = () => resolve(i * 10))),
    );
    // The last choice finishes first, the first last: the answer is still in index order.
    for (const done of [...finish].reverse()) done();
    expect(await run).toEqual([0, 10, 20]);
  });

  it('stops the other choices when one fails, and fails with its error', async () => {
    const stopped: number[] = [];
    const run = runChoices(3, new AbortController().signal, (i, signal) => {
      if (i === 1) return Promise.reject(new Error('choice 1 broke'));
      return new Promise<number>((resolve) => signal.addEventListener('abort', () => (stopped.push(i), resolve(i))));
    });
    await expect(run).rejects.toThrow('choice 1 broke');
    expect(stopped.sort()).toEqual([0, 2]);
  });

  it('gives choice i the seed plus i, and no seed stays none', () => {
    expect([0, 1, 2].map((i) => choiceSeed(7, i))).toEqual([7, 8, 9]);
    expect(choiceSeed(2 ** 32 - 1, 1)).toBe(0);
    expect(choiceSeed(undefined, 2)).toBeUndefined();
  });
});
