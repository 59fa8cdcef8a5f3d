// Server-sent events read from an upstream's bytes as they arrive: bytes in,
// whole events out, what follows the last event boundary carried to the next
// read. Every relay that reads an upstream stream event by event (a foreign
// remote's answer, an engine's chat stream translated for another dialect,
// the native Responses tap) needs the same three things: events split at a
// blank line however it is framed (LF or CRLF), decoded only once whole so
// a character cut between two reads is never cut in half, and a bound on
// the carry so an upstream that never sends a boundary cannot grow memory
// without limit. They are here once, table-tested without sockets.

/**
 * The most bytes one event may reach before its boundary: the largest an
 * upstream sends legitimately is the Responses API's final
 * `response.completed`, which repeats the whole answer (text, tool calls,
 * logprobs). 16 MiB holds one far longer than any model's output limit and
 * bounds what a stream without boundaries can make llmgw hold per request.
 */
export const SSE_EVENT_LIMIT_BYTES = 16 * 2 ** 20;

/** Bytes up to and including the last event boundary ("\n\n" or "\r\n\r\n") in `data`; 0 when none. */
export function lastEventEnd(data: Buffer): number {
  const lf = data.lastIndexOf('\n\n');
  const crlf = data.lastIndexOf('\r\n\r\n');
  return Math.max(lf === -1 ? 0 : lf + 2, crlf === -1 ? 0 : crlf + 4);
}

/** Whole events' text split into events (LF or CRLF framed); a trailing empty piece is left out. */
export function splitEvents(text: string): string[] {
  const events = text.split(/\r?\n\r?\n/);
  if (events.length > 0 && events[events.length - 1] === '') events.pop();
  return events;
}

/**
 * An event's data: its `data:` lines' values, leading spaces dropped, joined
 * with nothing between them (a JSON value an upstream cut across lines reads
 * whole again); '' when it has none (a comment, a keep-alive, an `event:`
 * line alone).
 */
export function eventData(event: string): string {
  let data = '';
  for (const line of event.split(/\r?\n/)) if (line.startsWith('data:')) data += line.slice(5).trimStart();
  return data;
}

const NOTHING = Buffer.alloc(0);

/** One upstream stream's splitter: push each read, get the text of the events it completed. */
export class SseEvents {
  /** Reads after the last event boundary, waiting for the rest of their event; kept apart until one ends. */
  private carry: Buffer[] = [];
  private carried = 0;

  /** `limitBytes`: the most one unfinished event may hold (0 or absent = SSE_EVENT_LIMIT_BYTES). */
  constructor(private readonly limitBytes = 0) {}

  /**
   * The text of the whole events this read completed ('' when none did), or
   * null when the event being read has passed the limit without a boundary:
   * what was carried is dropped, and the stream is to be ended (a relay
   * ends it with its dialect's error event). Reading may go on after null;
   * it starts afresh from the next read.
   */
  push(chunk: Buffer): string | null {
    const whole = this.pushBytes(chunk);
    return whole === null ? null : whole.length > 0 ? whole.toString('utf8') : '';
  }

  /** As push, the whole events' bytes (empty when none ended): for a relay that writes them on as they came. */
  pushBytes(chunk: Buffer): Buffer | null {
    let data = chunk;
    let end: number;
    if (this.carried === 0) end = lastEventEnd(chunk);
    else {
      // Only the new read (and the 3 bytes before it, for a boundary cut between reads) is searched: a long
      // event arriving in many reads is copied once when it ends, not once per read.
      const before = this.lastCarried(3);
      const found = lastEventEnd(Buffer.concat([before, chunk]));
      if (found === 0) return this.hold(chunk) ? NOTHING : null;
      data = Buffer.concat([...this.carry, chunk]);
      end = this.carried - before.length + found;
      this.carry = [];
      this.carried = 0;
    }
    if (end < data.length && !this.hold(data.subarray(end))) return null;
    // Most reads end on a boundary: handed back as they came, no view made.
    return end === data.length ? data : end > 0 ? data.subarray(0, end) : NOTHING;
  }

  /** What is left when the stream ends (a last event without its blank line), as text; '' when nothing is. Clears it. */
  rest(): string {
    return this.restBytes()?.toString('utf8') ?? '';
  }

  /** As rest, its bytes; null when nothing is left. */
  restBytes(): Buffer | null {
    const out = this.carried > 0 ? (this.carry.length === 1 ? this.carry[0]! : Buffer.concat(this.carry)) : null;
    this.clear();
    return out;
  }

  /** Forgets what is carried (the stream broke: a half event is never delivered). */
  clear(): void {
    this.carry = [];
    this.carried = 0;
  }

  /** Bytes carried now, waiting for their event's end. */
  get carriedBytes(): number {
    return this.carried;
  }

  /** The last `n` bytes carried (fewer when fewer are), across reads however small. */
  private lastCarried(n: number): Buffer {
    const parts: Buffer[] = [];
    let have = 0;
    for (let i = this.carry.length - 1; i >= 0 && have < n; i--) {
      const b = this.carry[i]!;
      const take = b.subarray(Math.max(0, b.length - (n - have)));
      parts.unshift(take);
      have += take.length;
    }
    return parts.length === 1 ? parts[0]! : Buffer.concat(parts);
  }

  /** Carries `bytes`; false (and nothing carried) when the event would pass the limit. */
  private hold(bytes: Buffer): boolean {
    if (this.carried + bytes.length > (this.limitBytes || SSE_EVENT_LIMIT_BYTES)) {
      this.clear();
      return false;
    }
    this.carry.push(bytes);
    this.carried += bytes.length;
    return true;
  }
}
