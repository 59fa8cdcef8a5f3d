// Priority classes: which requests a saturated model serves first. A request
// is `interactive` unless its key says `batch`; the `x-llmgw-priority` header
// may lower a request's class, never raise it, so a batch key cannot jump the
// queue by asking. Separate from the queue itself, which only orders classes
// it is given.

import { PRIORITY_CLASSES, type PriorityClass } from '../ports/index.js';

/** The header a client lowers its request's class with. */
export const PRIORITY_HEADER = 'x-llmgw-priority';

/** Lower is served first. */
export function rankOf(cls: PriorityClass): number {
  return cls === 'interactive' ? 0 : 1;
}

/**
 * The request's class: the key's (absent = interactive), lowered by the
 * header when it names a lower class. A header naming a higher class than
 * the key's is ignored rather than refused: the client asked for at most
 * that, and got at most that. A header naming no class is an error the
 * caller turns into a 400, since a typo would otherwise silently keep a
 * bulk job at interactive priority.
 */
export function requestPriority(
  keyClass: PriorityClass | undefined,
  header: string | string[] | undefined,
): { ok: true; cls: PriorityClass } | { ok: false; message: string } {
  const base = keyClass ?? 'interactive';
  if (header === undefined) return { ok: true, cls: base };
  const asked = (Array.isArray(header) ? header[0] : header)?.trim().toLowerCase();
  if (asked === undefined || asked === '') return { ok: true, cls: base };
  if (!(PRIORITY_CLASSES as readonly string[]).includes(asked)) {
    return {
      ok: false,
      message: `header ${PRIORITY_HEADER} must be one of ${PRIORITY_CLASSES.join(', ')}; got ${JSON.stringify(asked.slice(0, 40))}`,
    };
  }
  const cls = asked as PriorityClass;
  return { ok: true, cls: rankOf(cls) > rankOf(base) ? cls : base };
}
