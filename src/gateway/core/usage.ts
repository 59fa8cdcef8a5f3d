// The end of a response, where the engine puts its usage: the body's last
// object, or a stream's final SSE chunk (or, for the Responses API, the
// final event's response) (the router asks every stream for
// it, and keeps it from a client that did not). What the figures are
// recorded into (UsageSink) is src/control/keys' business.

/** Bytes of the end of a response kept to find its usage: the usage object and [DONE] fit many times over. */
export const USAGE_TAIL_BYTES = 4096;

/** The key an engine's usage object is under; found as bytes, then checked to open an object. */
const USAGE_KEY = Buffer.from('"usage"');

/**
 * Keeps the last bytes of a response as it passes, without copying every
 * chunk: usage is at the end of a JSON answer and in the last chunk of a stream.
 */
export class TailKeeper {
  private chunks: Buffer[] = [];
  private bytes = 0;

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.bytes += chunk.length;
    while (this.chunks.length > 1 && this.bytes - this.chunks[0]!.length >= USAGE_TAIL_BYTES) {
      this.bytes -= this.chunks.shift()!.length;
    }
  }

  /** The kept bytes as text: at least the last USAGE_TAIL_BYTES, a short answer whole (a trace's finish reasons read it). */
  text(): string {
    return this.chunks.length === 1 ? this.chunks[0]!.toString('utf8') : Buffer.concat(this.chunks).toString('utf8');
  }

  /**
   * The engine's usage from the kept bytes, as usageFromTail reads it from
   * text, but searched backwards as bytes: only what follows the usage key
   * (the end of the last event and [DONE]) is decoded, not the whole tail.
   */
  usage(): { promptTokens: number; completionTokens: number } | null {
    const all = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
    const from = Math.max(0, all.length - USAGE_TAIL_BYTES * 2);
    for (let at = all.lastIndexOf(USAGE_KEY); at >= from; at = at === 0 ? -1 : all.lastIndexOf(USAGE_KEY, at - 1)) {
      if (opensObject(all, at + USAGE_KEY.length)) return usageIn(all.toString('utf8', at));
    }
    return null;
  }
}

/**
 * Usage from the end of a response. Key names appear unescaped only as JSON
 * keys (inside generated text they are escaped), so the last match is the
 * engine's own usage object.
 */
export function usageFromTail(tail: string): { promptTokens: number; completionTokens: number } | null {
  let at = -1;
  // However the engine spaces its JSON (`"usage":{` or Python's `"usage": {`).
  for (const m of tail.matchAll(/"usage"\s*:\s*\{/g)) at = m.index;
  if (at === -1) return null;
  return usageIn(tail.slice(at));
}

/**
 * The counts of a usage object that `part` starts with, in each API's own
 * names: prompt_tokens and completion_tokens (Chat Completions, embeddings,
 * vLLM's score), input_tokens and output_tokens (Responses, OpenAI's
 * token-billed transcriptions), or total_tokens alone (rerank, as vLLM and
 * Jina answer it), counted as prompt. None of them (vLLM's transcription
 * usage is in seconds of audio) = null.
 */
function usageIn(part: string): { promptTokens: number; completionTokens: number } | null {
  const p = /"prompt_tokens":\s*(\d+)/.exec(part);
  if (p) {
    const c = /"completion_tokens":\s*(\d+)/.exec(part);
    return { promptTokens: Number(p[1]), completionTokens: c ? Number(c[1]) : 0 };
  }
  const input = /"input_tokens":\s*(\d+)/.exec(part);
  if (input) {
    const output = /"output_tokens":\s*(\d+)/.exec(part);
    return { promptTokens: Number(input[1]), completionTokens: output ? Number(output[1]) : 0 };
  }
  const total = /"total_tokens":\s*(\d+)/.exec(part);
  return total ? { promptTokens: Number(total[1]), completionTokens: 0 } : null;
}

/** Whether `bytes` from `i` is `:` and `{`, with JSON whitespace around the colon (`"usage":{` or Python's `"usage": {`). */
function opensObject(bytes: Buffer, i: number): boolean {
  let k = skipSpace(bytes, i);
  if (bytes[k] !== 0x3a) return false;
  k = skipSpace(bytes, k + 1);
  return bytes[k] === 0x7b;
}

function skipSpace(bytes: Buffer, i: number): number {
  let k = i;
  while (bytes[k] === 0x20 || bytes[k] === 0x0a || bytes[k] === 0x0d || bytes[k] === 0x09) k++;
  return k;
}
