// Turns zod's findings into sentences an operator can act on: one per
// problem, each naming the field by its path ("profiles[1].gpus") and, for an
// unknown key, the nearest valid one. Shared by the configuration, the catalog
// and request bodies so that every listener words mistakes the same way.
import type { z } from 'zod';
import { nearestName } from '../units/index.js';

type AnySchema = z.ZodType;

/** The object keys a schema accepts at `path`, or [] when it is not an object there. */
function keysAt(schema: AnySchema, path: readonly PropertyKey[]): string[] {
  let node: AnySchema | undefined = unwrap(schema);
  for (const segment of path) {
    if (!node) return [];
    const def = (node as unknown as { _zod: { def: Record<string, unknown> } })._zod.def;
    if (def.type === 'object') node = unwrap((def.shape as Record<string, AnySchema>)[String(segment)]);
    else if (def.type === 'array') node = unwrap(def.element as AnySchema);
    else if (def.type === 'record') node = unwrap(def.valueType as AnySchema);
    else return [];
  }
  if (!node) return [];
  const def = (node as unknown as { _zod: { def: Record<string, unknown> } })._zod.def;
  return def.type === 'object' ? Object.keys(def.shape as object) : [];
}

function unwrap(schema: AnySchema | undefined): AnySchema | undefined {
  let node = schema;
  for (let i = 0; node && i < 10; i++) {
    const def = (node as unknown as { _zod: { def: Record<string, unknown> } })._zod.def;
    const inner = (def.innerType ?? (def.type === 'pipe' ? def.in : undefined)) as AnySchema | undefined;
    if (!inner) return node;
    node = inner;
  }
  return node;
}

export function formatPath(path: readonly PropertyKey[], prefix = ''): string {
  let out = prefix;
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    // A key with control characters (a hostile label) is quoted, escaped: the sentence is printed and logged.
    // eslint-disable-next-line no-control-regex
    else if (/[\x00-\x1f\x7f-\x9f]/.test(String(segment)))
      out += `[${JSON.stringify(String(segment)).replace(/[\x7f-\x9f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)}]`;
    else out += out ? `.${String(segment)}` : String(segment);
  }
  return out || '(the whole value)';
}

/** One sentence per zod issue. `prefix` names where the value came from ("profiles", "config"). */
export function describeIssues(schema: AnySchema, error: z.ZodError, prefix = ''): string[] {
  const out: string[] = [];
  for (const issue of error.issues) {
    if (issue.code === 'unrecognized_keys') {
      const valid = keysAt(schema, issue.path);
      for (const key of issue.keys) {
        const near = nearestName(key, valid);
        const where = formatPath([...issue.path, key], prefix);
        out.push(
          near
            ? `${where}: unknown field; did you mean "${near}"?`
            : `${where}: unknown field; valid fields here are ${valid.join(', ')}`,
        );
      }
      continue;
    }
    if (issue.code === 'invalid_key') {
      // zod words a bad record key generically; the key's own check says what is wanted.
      const inner = issue.issues[0]?.message ?? 'not a valid key here';
      out.push(`${formatPath(issue.path, prefix)}: ${inner}`);
      continue;
    }
    if (issue.code === 'invalid_type' && issue.message.endsWith('received undefined')) {
      out.push(`${formatPath(issue.path, prefix)}: is required (${issue.expected})`);
      continue;
    }
    out.push(`${formatPath(issue.path, prefix)}: ${issue.message}`);
  }
  return out;
}
