// Pool selectors: Kubernetes label-selector syntax over node labels, because
// operators of GPU fleets already write it ("pool=a100", "zone in (a,b)",
// "gpu!=t4", "pool", "!spot"; a comma is AND). Parsed once per distinct text
// and matched per node, so it lives apart from the checks that use it. The
// `>`/`<` operators of Kubernetes are not supported: node labels here are
// names, not numbers.
import { ValidationError } from '../../errors/index.js';

export type LabelRequirement =
  | { readonly key: string; readonly op: 'exists' }
  | { readonly key: string; readonly op: 'not_exists' }
  | { readonly key: string; readonly op: 'eq'; readonly value: string }
  | { readonly key: string; readonly op: 'neq'; readonly value: string }
  | { readonly key: string; readonly op: 'in'; readonly values: readonly string[] }
  | { readonly key: string; readonly op: 'notin'; readonly values: readonly string[] };

export interface LabelSelector {
  /** As the operator wrote it; shown in rejections. */
  readonly text: string;
  /** All must hold; none = every node matches (an empty selector, as in Kubernetes). */
  readonly requirements: readonly LabelRequirement[];
}

type Token =
  | { readonly kind: 'ident'; readonly text: string }
  | { readonly kind: 'op'; readonly text: '=' | '==' | '!=' | '!' | '(' | ')' | ',' | '>' | '<' };

const NAME_RE = /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const PREFIX_RE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

const SPECIAL = new Set(['!', '=', '(', ')', ',', '>', '<']);

function lex(text: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i]!;
    if (/\s/.test(c)) {
      i++;
    } else if (c === '=' && text[i + 1] === '=') {
      tokens.push({ kind: 'op', text: '==' });
      i += 2;
    } else if (c === '!' && text[i + 1] === '=') {
      tokens.push({ kind: 'op', text: '!=' });
      i += 2;
    } else if (SPECIAL.has(c)) {
      tokens.push({ kind: 'op', text: c as '=' });
      i++;
    } else {
      let j = i;
      while (j < text.length && !SPECIAL.has(text[j]!) && !/\s/.test(text[j]!)) j++;
      tokens.push({ kind: 'ident', text: text.slice(i, j) });
      i = j;
    }
  }
  return tokens;
}

function keyProblem(key: string): string | null {
  const slash = key.indexOf('/');
  const name = slash === -1 ? key : key.slice(slash + 1);
  if (slash !== -1) {
    const prefix = key.slice(0, slash);
    if (prefix.length === 0 || prefix.length > 253 || !PREFIX_RE.test(prefix)) {
      return `"${key}" is not a valid label key: the part before "/" must be a DNS name like example.com`;
    }
  }
  if (!NAME_RE.test(name)) {
    return `"${key}" is not a valid label key: want up to 63 letters, digits, "-", "_" or ".", starting and ending with a letter or digit`;
  }
  return null;
}

function valueProblem(value: string): string | null {
  if (value === '' || NAME_RE.test(value)) return null;
  return `"${value}" is not a valid label value: want up to 63 letters, digits, "-", "_" or ".", starting and ending with a letter or digit`;
}

/** Why `text` is not a valid selector, as a sentence; null when it is. For callers that gather problems (the catalog). */
export function labelSelectorProblem(text: string): string | null {
  const parsed = parseRequirements(text);
  return typeof parsed === 'string' ? `pool selector ${JSON.stringify(text)}: ${parsed}` : null;
}

/**
 * Parses a selector. Throws a ValidationError (LLMGW_CATALOG_INVALID, since a
 * selector is part of a profile) whose message shows what was wrong and the
 * forms that are accepted.
 */
export function parseLabelSelector(text: string): LabelSelector {
  const parsed = parseRequirements(text);
  if (typeof parsed === 'string') {
    throw new ValidationError('LLMGW_CATALOG_INVALID', [
      `pool selector ${JSON.stringify(text)}: ${parsed}; write requirements like pool=a100, gpu!=t4, zone in (a,b), zone notin (c), spot or !spot, joined by commas`,
    ]);
  }
  return { text, requirements: parsed };
}

function parseRequirements(text: string): LabelRequirement[] | string {
  const tokens = lex(text);
  const out: LabelRequirement[] = [];
  let i = 0;
  const peek = (): Token | undefined => tokens[i];
  const describe = (t: Token | undefined): string => (t === undefined ? 'the end' : `"${t.text}"`);

  if (tokens.length === 0) return out;
  for (;;) {
    let tok = tokens[i++];
    if (tok === undefined) return 'a requirement is missing after the last ","';
    if (tok.kind === 'op' && tok.text === '!') {
      tok = tokens[i++];
      if (tok?.kind !== 'ident') return `"!" must be followed by a label key, found ${describe(tok)}`;
      const problem = keyProblem(tok.text);
      if (problem) return problem;
      out.push({ key: tok.text, op: 'not_exists' });
    } else if (tok.kind === 'ident') {
      const key = tok.text;
      const problem = keyProblem(key);
      if (problem) return problem;
      const next = peek();
      if (next === undefined || (next.kind === 'op' && next.text === ',')) {
        out.push({ key, op: 'exists' });
      } else if (next.kind === 'op' && (next.text === '=' || next.text === '==' || next.text === '!=')) {
        i++;
        const valueTok = peek();
        let value = '';
        if (valueTok?.kind === 'ident') {
          value = valueTok.text;
          i++;
        } else if (valueTok !== undefined && !(valueTok.kind === 'op' && valueTok.text === ',')) {
          return `a value must follow "${key}${next.text}", found ${describe(valueTok)}`;
        }
        const vProblem = valueProblem(value);
        if (vProblem) return vProblem;
        out.push(next.text === '!=' ? { key, op: 'neq', value } : { key, op: 'eq', value });
      } else if (next.kind === 'ident' && (next.text === 'in' || next.text === 'notin')) {
        i++;
        if (!(peek()?.kind === 'op' && peek()?.text === '(')) {
          return `"${key} ${next.text}" must be followed by a list of values in parentheses, like (a,b); found ${describe(peek())}`;
        }
        i++;
        const values: string[] = [];
        for (;;) {
          const v = tokens[i++];
          if (v?.kind !== 'ident')
            return `a value is missing in the list after "${key} ${next.text}" (found ${describe(v)})`;
          const vProblem = valueProblem(v.text);
          if (vProblem) return vProblem;
          values.push(v.text);
          const sep = tokens[i++];
          if (sep?.kind === 'op' && sep.text === ')') break;
          if (!(sep?.kind === 'op' && sep.text === ',')) {
            return sep === undefined
              ? `missing ")" to close the values of "${key} ${next.text}"`
              : `expected "," or ")" in the values of "${key} ${next.text}", found ${describe(sep)}`;
          }
        }
        out.push({ key, op: next.text, values });
      } else if (next.kind === 'op' && (next.text === '>' || next.text === '<')) {
        return `the "${next.text}" operator is not supported; pools match label names, not numbers`;
      } else {
        return `after the key "${key}" expected "=", "!=", "in", "notin", "," or the end, found ${describe(next)}`;
      }
    } else {
      return `expected a label key, found ${describe(tok)}`;
    }
    const sep = tokens[i++];
    if (sep === undefined) return out;
    if (!(sep.kind === 'op' && sep.text === ',')) return `expected "," between requirements, found ${describe(sep)}`;
  }
}

function requirementHolds(req: LabelRequirement, labels: Readonly<Record<string, string>>): boolean {
  const has = Object.prototype.hasOwnProperty.call(labels, req.key);
  const value = has ? labels[req.key] : undefined;
  switch (req.op) {
    case 'exists':
      return has;
    case 'not_exists':
      return !has;
    case 'eq':
      return value === req.value;
    // As in Kubernetes, "!=" and "notin" also match a node without the label.
    case 'neq':
      return value !== req.value;
    case 'in':
      return value !== undefined && req.values.includes(value);
    case 'notin':
      return value === undefined || !req.values.includes(value);
  }
}

export function matchesLabels(selector: LabelSelector, labels: Readonly<Record<string, string>>): boolean {
  for (const req of selector.requirements) if (!requirementHolds(req, labels)) return false;
  return true;
}

/** One clause per requirement the labels fail, e.g. `label pool is "t4" (wants a100)`; empty when they match. */
export function labelMismatches(selector: LabelSelector, labels: Readonly<Record<string, string>>): string[] {
  const out: string[] = [];
  for (const req of selector.requirements) {
    if (requirementHolds(req, labels)) continue;
    const has = Object.prototype.hasOwnProperty.call(labels, req.key);
    const now = has ? `label ${req.key} is ${JSON.stringify(labels[req.key])}` : `label ${req.key} is not set`;
    switch (req.op) {
      case 'exists':
        out.push(now);
        break;
      case 'eq':
        out.push(`${now} (wants ${req.value})`);
        break;
      case 'in':
        out.push(`${now} (wants one of ${req.values.join(', ')})`);
        break;
      case 'not_exists':
      case 'neq':
      case 'notin':
        out.push(`${now}, which the pool excludes`);
        break;
    }
  }
  return out;
}
