// The usage-only event of a stream whose client did not ask for its usage:
// the router asks every stream for it (stream_options.include_usage, so a
// stream's tokens are counted), and cuts it from what that client is sent,
// so the client sees the stream it asked for. Apart from relay.ts, which
// writes a stream's bytes on as they came, because this reads them as
// events and their JSON.
import { eventData } from './sse-events.js';

/** What a usage-only event must hold, however it is spaced: an empty list (its choices). Only events with one are looked at closely. */
const EMPTY_LIST = Buffer.from('[]');
const EMPTY_LIST_SPACED = Buffer.from('[ ]');

/**
 * Whole SSE events without the usage-only one (`"choices": []` and a usage
 * object: what an engine sends last when asked for include_usage). Only
 * events with an empty list in them are decoded and parsed; the rest pass
 * as bytes (engines put `"usage": null` on every chunk, so "usage" alone
 * says nothing). This runs on the read that holds a stream's end, for
 * every stream whose client did not ask for its usage.
 */
export function withoutUsageEvent(data: Buffer): Buffer {
  let kept: Buffer[] | null = null;
  let from = 0;
  for (let at = emptyListAt(data, 0); at !== -1;) {
    const start = eventStart(data, at);
    const end = eventEnd(data, at);
    if (isUsageOnly(data.toString('utf8', start, end))) {
      (kept ??= []).push(data.subarray(from, start));
      from = end;
    }
    at = emptyListAt(data, end);
  }
  if (kept === null) return data;
  kept.push(data.subarray(from));
  return Buffer.concat(kept);
}

/** The next empty list (`[]` or `[ ]`) at or after `from`; -1 = none. */
function emptyListAt(data: Buffer, from: number): number {
  const a = data.indexOf(EMPTY_LIST, from);
  const b = data.indexOf(EMPTY_LIST_SPACED, from);
  return a === -1 ? b : b === -1 ? a : Math.min(a, b);
}

// A blank line ends an event, LF or CRLF framed: "\n\n", "\r\n\r\n" and the two mixed all end in one of these.
const LF_LF_TEXT = '\n\n';
const LF_CRLF_TEXT = '\n\r\n';

/** Where the event holding byte `at` starts: after the last blank line before it, else 0. */
function eventStart(data: Buffer, at: number): number {
  const lf = data.lastIndexOf(LF_LF_TEXT, at);
  const crlf = data.lastIndexOf(LF_CRLF_TEXT, at);
  return Math.max(lf === -1 ? 0 : lf + 2, crlf === -1 ? 0 : crlf + 3);
}

/** Where the event holding byte `at` ends: after its blank line, else at the end of `data` (a last event without one). */
function eventEnd(data: Buffer, at: number): number {
  const lf = data.indexOf(LF_LF_TEXT, at);
  const crlf = data.indexOf(LF_CRLF_TEXT, at);
  return Math.min(lf === -1 ? data.length : lf + 2, crlf === -1 ? data.length : crlf + 3);
}

function isUsageOnly(event: string): boolean {
  try {
    const chunk = JSON.parse(eventData(event)) as { choices?: unknown; usage?: unknown };
    return (
      Array.isArray(chunk.choices) &&
      chunk.choices.length === 0 &&
      typeof chunk.usage === 'object' &&
      chunk.usage !== null
    );
  } catch {
    return false;
  }
}
