// The usage-only event kept from a client that did not ask for it, on its
// own: which events are cut, however framed and spaced, and that a read
// without one passes as the same bytes.
import { describe, expect, it } from 'vitest';
import { withoutUsageEvent } from './withheld-usage.js';

const usageEvent =
  'data: {"id":"c","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}\n\n';

describe('the withheld usage event', () => {
  it('drops only the usage-only event: content that mentions "usage", and a chunk with choices and usage: null, pass', () => {
    const content = 'data: {"choices":[{"delta":{"content":"the \\"usage\\": field"}}]}\n\n';
    const withNull = 'data: {"choices":[{"delta":{"content":"x"}}],"usage":null}\n\n';
    const done = 'data: [DONE]\n\n';
    expect(withoutUsageEvent(Buffer.from(content + withNull + usageEvent + done)).toString()).toBe(
      content + withNull + done,
    );
    expect(withoutUsageEvent(Buffer.from(usageEvent.replace('\n\n', '\r\n\r\n'))).toString(), 'CRLF framing').toBe('');
    const spaced = 'data: {"choices": [], "usage": {"completion_tokens": 2}}\n\n';
    expect(withoutUsageEvent(Buffer.from(spaced)).toString(), "Python's json.dumps spacing").toBe('');
    expect(
      withoutUsageEvent(Buffer.from(content + usageEvent.trimEnd() + '\n')).toString(),
      'a last event without its blank line',
    ).toBe(content);
    const untouched = Buffer.from(content);
    expect(withoutUsageEvent(untouched), 'nothing dropped: the same bytes, not a copy').toBe(untouched);
    // Empty lists in other events (no tool calls yet, no logprobs) are looked at and kept; the events after the usage one too.
    const emptyTools = 'data: {"choices":[{"delta":{"tool_calls":[]}}],"usage":null}\r\n\r\n';
    const finish = 'data: {"choices":[{"delta":{},"finish_reason":"stop","logprobs":{"content":[ ]}}]}\r\n\r\n';
    const crlf = (s: string) => s.replace('\n\n', '\r\n\r\n');
    expect(
      withoutUsageEvent(Buffer.from(emptyTools + finish + crlf(usageEvent) + crlf(done))).toString(),
      'CRLF framed, other empty lists before it',
    ).toBe(emptyTools + finish + crlf(done));
    expect(withoutUsageEvent(Buffer.from(usageEvent + content + usageEvent)).toString(), 'each usage-only event').toBe(
      content,
    );
  });
});
