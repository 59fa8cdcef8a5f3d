// The relay's byte-level helper on its own: how many SSE events a read ends
// (where they end is sse-events.ts').
import { describe, expect, it } from 'vitest';
import { countEvents } from './relay.js';

describe('SSE relay helpers', () => {
  it('counts the events a read ends, LF or CRLF framed', () => {
    expect(countEvents(Buffer.from('data: a\n\ndata: b\n\ndata: [DONE]\n\n'))).toBe(3);
    expect(countEvents(Buffer.from('data: a\r\n\r\ndata: b\r\n\r\n'))).toBe(2);
    expect(countEvents(Buffer.from('data: a'))).toBe(0);
  });
});
