// Names on the wire are printed on operators' terminals (llmgw ctl) and in
// logs. A control character in one (an escape sequence, a newline) can drive
// a terminal or forge a line, and no honest machine has one in its hostname,
// labels, GPU names, mount points or engine names, so the schemas refuse
// them, naming the field. Free text (a shard's error, a GPU's problems) may
// hold anything and is made safe where it is printed (src/ctl/render.ts).
import { z } from 'zod';

// C0, DEL and C1.
// eslint-disable-next-line no-control-regex
const CONTROL_RE = /[\x00-\x1f\x7f-\x9f]/;
// eslint-disable-next-line no-control-regex
const CONTROLS_RE = /[\x00-\x1f\x7f-\x9f]/g;

/** The first control character in `s`, as U+XXXX; null when there is none. */
export function controlCharIn(s: string): string | null {
  const m = CONTROL_RE.exec(s);
  return m ? `U+${m[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}` : null;
}

/** A string for a name or label: no control characters; `what` names the field in the refusal. */
export function plainName(what: string, max?: number): z.ZodString {
  const base = max === undefined ? z.string() : z.string().max(max);
  return base.refine((s) => controlCharIn(s) === null, {
    error: (issue) =>
      `${what} holds a control character (${controlCharIn(String(issue.input))}); names and labels must be printable text`,
  });
}

/**
 * `s` with each control character written as the kernel writes it in
 * /proc/self/mountinfo (\012 for a newline): how the agent reports a mount
 * point that really holds one, which the schema would otherwise refuse.
 */
export function octalEscapeControls(s: string): string {
  return s.replace(CONTROLS_RE, (c) => `\\${c.charCodeAt(0).toString(8).padStart(3, '0')}`);
}
