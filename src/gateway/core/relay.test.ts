// The relay's byte-level helpers on their own: how many SSE events a read
// ends (where they end is sse-events.ts'), and the usage-only event kept
// from a client that did not ask for it.
import { describe, expect, it } from 'vitest';
import { countEvents, withoutUsageEvent } from './relay.js';

const usageEvent =
  'data: {"id":"c","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}\n\n';

describe('SSE relay helpers', () => {
  it('counts the events a read ends, LF or CRLF framed', () => {
    expect(countEvents(Buffer.from('data: a\n\ndata: b\n\ndata: [DONE]\n\n'))).toBe(3);
    expect(countEvents(Buffer.from('data: a\r\n\r\ndata: b\r\n\r\n'))).toBe(2);
    expect(countEvents(Buffer.from('data: a'))).toBe(0);
  });

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
  });
});
