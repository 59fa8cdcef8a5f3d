// The end of a response, where the engine puts its usage: the body's last
// object, or a stream's final SSE chunk (the router asks every stream for
// it, and keeps it from a client that did not). What the figures are
// recorded into (UsageSink) is src/control/keys' business.

/** Bytes of the end of a response kept to find its usage: the usage object and [DONE] fit many times over. */
export const USAGE_TAIL_BYTES = 4096;

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

  text(): string {
    const all = Buffer.concat(this.chunks);
    return all.subarray(Math.max(0, all.length - USAGE_TAIL_BYTES * 2)).toString('utf8');
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
  const part = tail.slice(at);
  const p = /"prompt_tokens":\s*(\d+)/.exec(part);
  const c = /"completion_tokens":\s*(\d+)/.exec(part);
  if (!p) return null;
  return { promptTokens: Number(p[1]), completionTokens: c ? Number(c[1]) : 0 };
}
