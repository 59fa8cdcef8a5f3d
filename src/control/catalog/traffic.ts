// A model's traffic rules as the operator writes them: `split` sends each
// request for the model to one of several models by weight (a canary), and
// `shadow` copies a sampled share of its requests to a candidate whose
// answers are compared and discarded. Checked in three steps like the rest
// of a definition: the shape (zod), the definition on its own (a target
// listed twice, a model shadowing itself), then against the whole catalog
// (targets that name no model, splits that lead back round to themselves).
// Apart from model.ts because none of it is about running replicas; the
// gateway reads the compiled form through its port (src/gateway/ports/traffic.ts).
import { z } from 'zod';
import { durationSchema } from '../../validation/durations.js';
import { SPLIT_BY, type ShadowRule, type SplitBy, type SplitTarget } from '../../gateway/ports/index.js';
import { parseDurationMs } from '../../units/index.js';

/** What a shadow's optional keys mean when absent: the one table of its defaults. */
export const SHADOW_DEFAULTS = Object.freeze({
  /** Copies of one model's requests in flight at once: a slow candidate costs the gateway at most this many sockets. */
  maxConcurrent: 4,
  /** A copy running longer is cut and counted as the candidate's error. */
  timeoutMs: 60_000,
});

/** The most targets one split lists: a canary has two or three; more is a mistake. */
const MAX_SPLIT_TARGETS = 16;

export const SplitTargetSchema = z.strictObject({
  /** A model's name or alias; the model carrying the split may name itself (its own replicas serve that share). */
  model: z.string().min(1, 'want the name of a model'),
  weight: z
    .number({ error: 'want a number, like 90' })
    .positive('want a weight above 0; leave the target out to send it nothing')
    .max(1_000_000),
});

export const SplitSchema = z
  .array(SplitTargetSchema)
  .min(1, 'a split needs at least one target; leave split out to serve the model itself')
  .max(MAX_SPLIT_TARGETS, `a split has at most ${MAX_SPLIT_TARGETS} targets`);

export const SplitBySchema = z.enum(SPLIT_BY as [SplitBy, ...SplitBy[]], {
  error: `want one of ${SPLIT_BY.join(', ')}`,
});

export const ShadowSchema = z.strictObject({
  /** The candidate's name or alias. */
  model: z.string().min(1, 'want the name of a model'),
  /** The share of requests copied: 0.05 = one in twenty. */
  share: z
    .number({ error: 'want a share between 0 and 1, like 0.05' })
    .gt(0, 'want a share above 0; leave shadow out to copy nothing')
    .max(1, 'want a share of at most 1 (every request)'),
  /** Absent = SHADOW_DEFAULTS.maxConcurrent. */
  max_concurrent: z.number().int().min(1).max(10_000).optional(),
  /** Absent = SHADOW_DEFAULTS.timeoutMs. */
  timeout: durationSchema({ like: '30s', aboveZero: true }).optional(),
});

/** The traffic keys of a definition, as written (what model.ts's schema adds). */
export interface TrafficDefinition {
  name: string;
  split?: z.output<typeof SplitSchema> | undefined;
  split_by?: SplitBy | undefined;
  shadow?: z.output<typeof ShadowSchema> | undefined;
}

/** The compiled rules: null = none. */
export interface CompiledTraffic {
  readonly split: readonly SplitTarget[] | null;
  readonly splitBy: SplitBy;
  readonly shadow: ShadowRule | null;
}

export function compileTraffic(def: TrafficDefinition): CompiledTraffic {
  const s = def.shadow;
  return {
    split: def.split ? def.split.map((t) => Object.freeze({ model: t.model, weight: t.weight })) : null,
    splitBy: def.split_by ?? 'request',
    shadow: s
      ? Object.freeze({
          model: s.model,
          share: s.share,
          maxConcurrent: s.max_concurrent ?? SHADOW_DEFAULTS.maxConcurrent,
          timeoutMs: s.timeout === undefined ? SHADOW_DEFAULTS.timeoutMs : (parseDurationMs(s.timeout) as number),
        })
      : null,
  };
}

/** Problems of the rules on their own (not against other models), as sentences. */
export function trafficProblems(def: TrafficDefinition): string[] {
  const problems: string[] = [];
  if (def.split) {
    const seen = new Set<string>();
    for (const t of def.split) {
      if (seen.has(t.model))
        problems.push(`split: "${t.model}" is listed twice; give it one entry with the sum of its weights`);
      seen.add(t.model);
    }
    if (def.split.length === 1 && def.split[0]!.model === def.name)
      problems.push(`split: the only target is the model itself; leave split out, or add the model to send a share to`);
  }
  if (def.split_by !== undefined && !def.split)
    problems.push('split_by: the model has no split; add one or leave split_by out');
  if (def.shadow && def.shadow.model === def.name) problems.push('shadow: a model cannot shadow itself');
  return problems;
}

/** What traffic problems need to know of another model in the catalog. */
export interface TrafficPeer {
  readonly name: string;
  readonly aliases: readonly string[];
  readonly split: readonly SplitTarget[] | null;
}

/**
 * Problems of the rules against the catalog: targets that name no model
 * (with the names that do), and a split that leads back to a model already
 * on its way (a → b → a would never end). `known` maps every name and alias
 * to its model; the definition's own names need not be in it.
 */
export function trafficCatalogProblems(def: TrafficDefinition, known: ReadonlyMap<string, TrafficPeer>): string[] {
  const problems: string[] = [];
  const own = (n: string) => n === def.name;
  const missing = (n: string) => !own(n) && !known.has(n);
  for (const t of def.split ?? []) {
    if (missing(t.model)) problems.push(`split: "${t.model}" names no model in the catalog; add it first`);
  }
  if (def.shadow && missing(def.shadow.model))
    problems.push(`shadow: "${def.shadow.model}" names no model in the catalog; add it first`);
  const cycle = splitCycle(def, known);
  if (cycle) problems.push(`split: a cycle ${cycle.join(' -> ')}; a split must end at models that serve themselves`);
  return problems;
}

/** The first cycle through split targets from the definition (a self-target is a leaf, not a loop), as names; null = none. */
function splitCycle(def: TrafficDefinition, known: ReadonlyMap<string, TrafficPeer>): string[] | null {
  const targetsOf = (name: string): readonly string[] => {
    if (name === def.name) return (def.split ?? []).map((t) => t.model);
    return (known.get(name)?.split ?? []).map((t) => t.model);
  };
  const canonical = (n: string) => (n === def.name ? def.name : (known.get(n)?.name ?? n));
  const walk = (current: string, path: string[]): string[] | null => {
    for (const next of targetsOf(current)) {
      const target = canonical(next);
      if (target === current) continue;
      if (path.includes(target)) return [...path, target];
      if (target === def.name || known.has(target)) {
        const found = walk(target, [...path, target]);
        if (found) return found;
      }
    }
    return null;
  };
  return walk(def.name, [def.name]);
}

/** The names a model's rules point at, for the refusal to remove a model another still sends traffic to. */
export function trafficTargets(rules: CompiledTraffic): string[] {
  return [...(rules.split ?? []).map((t) => t.model), ...(rules.shadow ? [rules.shadow.model] : [])];
}
