import { describe, expect, it } from 'vitest';
import { contextLengthExceeded } from './llama-runtime.js';

describe("the builtin engine's context_length_exceeded", () => {
  // Guards against the remedy naming only engine flags: someone who ran `llmgw up` never typed them, and the
  // fix goes in the catalog profile's `args`, which the message did not mention.
  it('names the catalog `args` where llmgw takes the flags from, with a context that would fit', () => {
    const err = contextLengthExceeded(256, 950, 'messages', 2);
    expect(err.code).toBe('LLMGW_CONTEXT_LENGTH_EXCEEDED');
    expect(err.message).toMatch(
      /^This model's maximum context length is 256 tokens\. However, your messages resulted in 950 tokens\./,
    );
    expect(err.message).toContain('--ctx-size or fewer --parallel');
    // 2 × 950 rounds up to 2048 per sequence; two sequences share --ctx-size.
    expect(err.message).toContain("catalog profile, e.g. args: [--ctx-size, '4096']");
  });
});
