// How a part of llmgw gets its logger: a child of the logger above it whose
// `part` names the whole path ("control.reconciler", "up.control.events").
// Kept apart because pino appends a child's bindings to its parent's, so a
// plain `child({ part })` writes the key twice ("part":"control",
// "part":"reconciler"), which some log tools read as the first and others as
// the last. The control plane, the agent and the CLI all nest parts, so the
// one way to do it lives where each of them can import it.
import pino, { type Bindings, type Logger } from 'pino';

const { chindingsSym } = pino.symbols;

/**
 * A child of `parent` for the part named `part`, carrying `bindings` too.
 * Its log lines have exactly one `part` key: the parent's part and this one
 * joined with a dot, or just `part` when the parent has none.
 */
export function childLogger(parent: Logger, part: string, bindings: Bindings = {}): Logger {
  const { part: _ignored, ...rest } = bindings;
  const above: unknown = parent.bindings().part;
  if (typeof above !== 'string' || above === '') return parent.child({ ...rest, part });
  const child = parent.child(rest);
  // pino.symbols is pino's published way to adjust a logger's state: the
  // bindings are one pre-serialised string, and the parent's part is
  // rewritten in place so the key keeps its position and appears once.
  const holder = child as unknown as Record<symbol, string>;
  const serialised = holder[chindingsSym] ?? '';
  const key = `,"part":${JSON.stringify(above)}`;
  const at = serialised.lastIndexOf(key);
  const dotted = `,"part":${JSON.stringify(`${above}.${part}`)}`;
  holder[chindingsSym] =
    at === -1 ? serialised + dotted : serialised.slice(0, at) + dotted + serialised.slice(at + key.length);
  return child;
}
