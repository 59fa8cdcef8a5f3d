// JSON Schema's `pattern` as a GBNF expression, so the builtin engine enforces a string's pattern while the model
// writes it instead of refusing the schema. It is separate from the schema walker because it is a small compiler of its
// own: an ECMAScript (`u` flag) regex parser, set algebra over code points and JSON string escaping, none of which the
// walker needs to see. The grammar's language is a SUBSET of what the regex matches, never more: anchors at the ends
// are dropped (a string that fully matches also matches a search), unbounded repeats are capped, and characters a JSON
// string must escape are written as escapes where the pattern names them and left out where it only excludes others.

/** What a pattern became: a GBNF expression for the JSON text between a string's quotes, or why it cannot be one. */
export type PatternGrammar = { ok: true; gbnf: string } | { ok: false; why: string };

type Range = readonly [number, number];
type Node =
  | { t: 'set'; set: Range[] }
  | { t: 'seq'; items: Node[] }
  | { t: 'alt'; alts: Node[] }
  | { t: 'rep'; node: Node; min: number; max: number; at: number }
  | { t: 'anchor'; end: boolean; at: number };

/** A pattern this module cannot turn into a grammar; the message is the `why` a user reads. */
class Refusal extends Error {}
/** A repetition that would make llama.cpp's parser exceed its rule limit; retried with smaller caps first. */
class TooBig extends Refusal {}

// llama.cpp refuses a repetition whose (rules in the repeated group) × (its bound) reaches 2,000, and reads an explicit
// upper bound above 2,000 as "unbounded"; explicit bounds are therefore capped too (still a subset).
const RULE_LIMIT = 2000;
const EXPLICIT_CAP = 1000;
const MAX_CP = 0x10ffff;

function norm(ranges: readonly Range[]): Range[] {
  const sorted = [...ranges].sort((a, b) => a[0] - b[0]);
  const out: [number, number][] = [];
  for (const [lo, hi] of sorted) {
    const last = out[out.length - 1];
    if (last && lo <= last[1] + 1) last[1] = Math.max(last[1], hi);
    else out.push([lo, hi]);
  }
  return out;
}
function complement(ranges: readonly Range[]): Range[] {
  const out: Range[] = [];
  let next = 0;
  for (const [lo, hi] of norm(ranges)) {
    if (lo > next) out.push([next, lo - 1]);
    next = Math.max(next, hi + 1);
  }
  if (next <= MAX_CP) out.push([next, MAX_CP]);
  return out;
}
const intersect = (a: readonly Range[], b: readonly Range[]): Range[] =>
  complement([...complement(a), ...complement(b)]);
const one = (cp: number): Range[] => [[cp, cp]];

/** Ranges written the way a regex class body is (`0-9A-Z`), for the fixed sets below. */
function spec(body: string): Range[] {
  const cps = Array.from(body, (c) => c.codePointAt(0) ?? 0);
  const out: Range[] = [];
  for (let k = 0; k < cps.length; k++) {
    const [lo, dash, hi] = [cps[k] ?? 0, cps[k + 1], cps[k + 2]];
    out.push(dash === 0x2d && hi !== undefined ? [lo, hi] : [lo, lo]);
    if (dash === 0x2d && hi !== undefined) k += 2;
  }
  return norm(out);
}
const DIGIT = spec('0-9');
const WORD = spec('0-9A-Z_a-z');
const SPACE = spec('\t-\r \xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff');
const LINE_TERMINATORS = spec('\n\r\u2028\u2029');
/** What a JSON string must escape: control characters, the quote and the backslash. */
const ESCAPED = spec('\0-\x1f"\\');
/** What a JSON string holds as itself; lone surrogates cannot be written in UTF-8 at all. */
const PLAIN = complement([...ESCAPED, ...spec('\ud800-\udfff')]);
/**
 * Every character outside `ranges` that a JSON string holds as itself. Sets the pattern only excludes from (`[^…]`,
 * `.`, \D \S \W) leave out what would need an escape: still a subset, and no model is steered to write `\u0001`.
 */
const negated = (ranges: readonly Range[]): Range[] => intersect(complement(ranges), PLAIN);

/** How a JSON string writes the code point: JSON.stringify's choice, so `\n` rather than `\u000a`. */
const jsonText = (cp: number): string => JSON.stringify(String.fromCodePoint(cp)).slice(1, -1);
/** The code point in GBNF: `safe` characters as themselves, the rest as hex escapes (which need no further quoting). */
function gbnfChar(cp: number, safe: RegExp): string {
  const c = String.fromCodePoint(cp);
  if (safe.test(c)) return c;
  const [esc, width] = cp < 0x100 ? ['x', 2] : cp < 0x10000 ? ['u', 4] : ['U', 8];
  return `\\${esc}${cp.toString(16).toUpperCase().padStart(width, '0')}`;
}
function literal(text: string): string {
  const char = (c: string) => (c === '"' || c === '\\' ? `\\${c}` : gbnfChar(c.codePointAt(0) ?? 0, /^[ -~]$/u));
  return `"${Array.from(text, char).join('')}"`;
}
function gbnfClass(ranges: readonly Range[]): string {
  const write = (rs: readonly Range[]) =>
    rs.map(([lo, hi]) => gbnfChar(lo, /^\w$/u) + (hi > lo ? '-' + gbnfChar(hi, /^\w$/u) : '')).join('');
  const outside = complement(ranges);
  return outside.length < ranges.length ? `[^${write(outside)}]` : `[${write(ranges)}]`;
}

/** A recursive-descent reader of ECMAScript `u`-mode syntax; the caller has already let `new RegExp` check it. */
class Parser {
  private readonly cps: string[];
  private i = 0;
  constructor(pattern: string) {
    this.cps = Array.from(pattern);
  }
  parse(): Node {
    const node = this.alt();
    if (this.i < this.cps.length) this.refuse(`an unexpected "${this.peek()}"`, this.i);
    return node;
  }
  private peek = (ahead = 0): string => this.cps[this.i + ahead] ?? '';
  private next = (): string => this.cps[this.i++] ?? '';
  private eat(s: string): boolean {
    if (this.cps.slice(this.i, this.i + s.length).join('') !== s) return false;
    this.i += s.length;
    return true;
  }
  private refuse(what: string, at: number, fix = ''): never {
    throw new Refusal(`${what} at character ${at + 1} of the pattern cannot be enforced by a grammar${fix}`);
  }
  private alt(): Node {
    const alts = [this.seq()];
    while (this.eat('|')) alts.push(this.seq());
    return alts.length === 1 ? (alts[0] as Node) : { t: 'alt', alts };
  }
  private seq(): Node {
    const items: Node[] = [];
    while (this.i < this.cps.length && this.peek() !== '|' && this.peek() !== ')') items.push(this.term());
    return { t: 'seq', items };
  }
  private term(): Node {
    const at = this.i;
    const node = this.atom();
    let min: number, max: number;
    if (this.eat('*')) [min, max] = [0, Infinity];
    else if (this.eat('+')) [min, max] = [1, Infinity];
    else if (this.eat('?')) [min, max] = [0, 1];
    else if (this.eat('{')) {
      min = this.int();
      max = this.eat(',') ? (this.peek() === '}' ? Infinity : this.int()) : min;
      this.eat('}');
    } else return node;
    this.eat('?'); // lazy or greedy: the same set of strings
    return { t: 'rep', node, min, max, at };
  }
  private int(): number {
    let digits = '';
    while (/^\d$/.test(this.peek())) digits += this.next();
    return Number(digits);
  }
  private atom(): Node {
    const at = this.i;
    const c = this.next();
    if (c === '^' || c === '$') return { t: 'anchor', end: c === '$', at };
    if (c === '.') return { t: 'set', set: negated(LINE_TERMINATORS) };
    if (c === '[') return { t: 'set', set: this.cls() };
    if (c === '\\') return { t: 'set', set: this.escape(false) };
    if (c !== '(') return { t: 'set', set: one(c.codePointAt(0) ?? 0) };
    if (this.eat('?')) {
      const look = ['<=', '<!', '=', '!'].find((s) => this.eat(s));
      if (look)
        this.refuse(
          `the look${look[0] === '<' ? 'behind' : 'ahead'} "(?${look}"`,
          at,
          '; rewrite it without lookarounds',
        );
      // A named group's name matches nothing.
      if (this.eat('<')) this.i = this.cps.indexOf('>', this.i) + 1;
      else if (!this.eat(':')) this.refuse(`the group "(?${this.peek()}"`, at);
    }
    const node = this.alt();
    this.eat(')');
    return node;
  }
  private cls(): Range[] {
    const negate = this.eat('^');
    const set: Range[] = [];
    while (this.i < this.cps.length && !this.eat(']')) {
      const lo = this.classAtom();
      if (this.peek() === '-' && this.peek(1) !== ']' && this.peek(1) !== '' && lo.length === 1) {
        this.i++;
        set.push([lo[0]?.[0] ?? 0, this.classAtom()[0]?.[1] ?? 0]);
      } else set.push(...lo);
    }
    return negate ? negated(set) : norm(set);
  }
  private classAtom(): Range[] {
    const c = this.next();
    return c === '\\' ? this.escape(true) : one(c.codePointAt(0) ?? 0);
  }
  private escape(inClass: boolean): Range[] {
    const at = this.i - 1;
    const c = this.next();
    const simple: Record<string, Range[]> = {
      d: DIGIT,
      w: WORD,
      s: SPACE,
      f: one(12),
      n: one(10),
      r: one(13),
      t: one(9),
      v: one(11),
    };
    if (simple[c]) return simple[c];
    if (c === 'D' || c === 'W' || c === 'S') return negated(simple[c.toLowerCase()] ?? []);
    if (c === 'b' && inClass) return one(8);
    if (c === 'b' || c === 'B')
      this.refuse(`the word boundary "\\${c}"`, at, '; write the characters around it instead');
    if (c === 'k' || /^[1-9]$/.test(c)) this.refuse(`the backreference "\\${c}"`, at, '; repeat the group instead');
    if (c === 'p' || c === 'P')
      this.refuse(`the property escape "\\${c}{…}"`, at, '; list the characters, as in [A-Za-z]');
    if (c === '0') return one(0);
    if (c === 'c') return one((this.next().codePointAt(0) ?? 0) % 32);
    if (c === 'x') return one(parseInt(this.next() + this.next(), 16));
    if (c !== 'u') return one(c.codePointAt(0) ?? 0); // an escaped syntax character, `/` or `-`
    if (this.eat('{')) {
      let hex = '';
      while (this.i < this.cps.length && this.peek() !== '}') hex += this.next();
      this.eat('}');
      return one(parseInt(hex, 16));
    }
    const lead = parseInt(this.cps.slice(this.i, (this.i += 4)).join(''), 16);
    const trail = /^\\u[dD][c-fC-F][\da-fA-F]{2}$/.test(this.cps.slice(this.i, this.i + 6).join(''));
    if (lead < 0xd800 || lead > 0xdbff || !trail) return one(lead);
    const low = parseInt(this.cps.slice(this.i + 2, (this.i += 6)).join(''), 16);
    return one(0x10000 + (lead - 0xd800) * 0x400 + (low - 0xdc00));
  }
}

const EMPTY: Node = { t: 'seq', items: [] };
const isAnchor = (node: Node | undefined, end: boolean) => node?.t === 'anchor' && node.end === end;
/** The tree without its anchors, refusing any `^` or `$` that is not where the pattern starts or ends. */
function dropAnchors(node: Node, start: boolean, end: boolean): Node {
  switch (node.t) {
    case 'anchor':
      if (node.end ? end : start) return EMPTY;
      throw new Refusal(
        `"${node.end ? '$' : '^'}" at character ${node.at + 1} of the pattern is not at its ${node.end ? 'end' : 'start'}; ` +
          'a grammar can only drop anchors at the ends of a pattern',
      );
    case 'alt':
      return { t: 'alt', alts: node.alts.map((a) => dropAnchors(a, start, end)) };
    case 'seq': {
      const { items } = node;
      const before = (k: number) => items.slice(0, k).every((n) => isAnchor(n, false));
      const after = (k: number) => items.slice(k + 1).every((n) => isAnchor(n, true));
      return { t: 'seq', items: items.map((n, k) => dropAnchors(n, start && before(k), end && after(k))) };
    }
    case 'rep':
      return { ...node, node: dropAnchors(node.node, node.max <= 1 && start, node.max <= 1 && end) };
    case 'set':
      return node;
  }
}

/**
 * GBNF text, the number of rules llama.cpp's parser makes for it (which bounds repetitions of it), and its shape: an
 * `atom` may take a quantifier as it is, an `alt` must be parenthesised inside a sequence. `lit` is the JSON text when
 * the node writes one fixed string, so neighbours merge into one literal. Null: no JSON string matches.
 */
type Gbnf = { gbnf: string; rules: number; kind: 'atom' | 'seq' | 'alt'; lit?: string };
type Out = Gbnf | null;
const fixed = (lit: string): Gbnf => ({ gbnf: literal(lit), rules: 0, kind: 'atom', lit });
const group = (o: Gbnf): Gbnf => (o.kind === 'atom' ? o : { gbnf: `(${o.gbnf})`, rules: o.rules + 1, kind: 'atom' });

function alternatives(outs: Out[]): Out {
  const live = outs.filter((o) => o !== null);
  if (live.length <= 1) return live[0] ?? null;
  return { gbnf: live.map((o) => o.gbnf).join(' | '), rules: live.reduce((n, o) => n + o.rules, 0), kind: 'alt' };
}

function emit(node: Node, cap: number): Out {
  switch (node.t) {
    case 'set': {
      const plain = intersect(node.set, PLAIN);
      const single = plain.length === 1 && plain[0]?.[0] === plain[0]?.[1];
      const outs: Out[] =
        plain.length === 0
          ? []
          : [single ? fixed(jsonText(plain[0]?.[0] ?? 0)) : { gbnf: gbnfClass(plain), rules: 0, kind: 'atom' }];
      for (const [lo, hi] of intersect(node.set, ESCAPED))
        for (let cp = lo; cp <= hi; cp++) outs.push(fixed(jsonText(cp)));
      return alternatives(outs);
    }
    case 'alt':
      return alternatives(node.alts.map((a) => emit(a, cap)));
    case 'seq': {
      const parts: Gbnf[] = [];
      for (const item of node.items) {
        const o = emit(item, cap);
        if (o === null) return null;
        const last = parts[parts.length - 1];
        if (o.lit === '') continue;
        if (o.lit !== undefined && last?.lit !== undefined) parts[parts.length - 1] = fixed(last.lit + o.lit);
        else parts.push(o);
      }
      if (parts.length <= 1) return parts[0] ?? fixed('');
      const grouped = parts.map((p) => (p.kind === 'alt' ? group(p) : p));
      const gbnf = grouped.map((p) => p.gbnf).join(' ');
      return { gbnf, rules: grouped.reduce((n, p) => n + p.rules, 0), kind: 'seq' };
    }
    case 'anchor':
      return fixed('');
    case 'rep': {
      const max = Math.max(node.min, node.max === Infinity ? cap : Math.min(node.max, EXPLICIT_CAP));
      const inner = emit(node.node, cap);
      if (inner === null) return node.min === 0 ? fixed('') : null;
      if (max === 0 || inner.lit === '') return fixed('');
      if (node.min === 1 && max === 1) return inner;
      if (inner.lit !== undefined && node.min === max && inner.lit.length * max <= 64)
        return fixed(inner.lit.repeat(max));
      const body = group(inner);
      if (Math.max(1, body.rules) * max >= RULE_LIMIT)
        throw new TooBig(
          `the repetition at character ${node.at + 1} of the pattern, ${max} times, makes a grammar larger than ` +
            `llama.cpp accepts (${RULE_LIMIT} rules); lower its bound or nest fewer repetitions`,
        );
      const suffix = node.min === 0 && max === 1 ? '?' : node.min === max ? `{${max}}` : `{${node.min},${max}}`;
      return { gbnf: body.gbnf + suffix, rules: body.rules + max - node.min, kind: 'seq' };
    }
  }
}

/**
 * `pattern` as a GBNF expression (no rule names, no top-level rule, may use parentheses, alternation, repetition
 * {m,n}, character classes, string literals) whose language is a SUBSET of the strings the regex matches (as JSON Schema
 * matches: unanchored search, ECMAScript syntax with the `u` flag), written as they appear inside a JSON string's quotes.
 * `maxRepeat` caps unbounded repetitions (`*`, `+`, `{n,}`) at that many occurrences so a model cannot run on forever.
 */
export function patternGrammar(pattern: string, maxRepeat = 16): PatternGrammar {
  try {
    new RegExp(pattern, 'u');
  } catch (err) {
    return { ok: false, why: `the pattern is not a valid ECMAScript regular expression: ${(err as Error).message}` };
  }
  try {
    const tree = dropAnchors(new Parser(pattern).parse(), true, true);
    // A pattern too large for llama.cpp at this cap may fit at a smaller one; each cap still gives a subset.
    for (let cap = Math.max(0, Math.floor(maxRepeat) || 0); ; cap = Math.floor(cap / 2)) {
      try {
        const out = emit(tree, cap);
        if (out === null) return { ok: false, why: 'the pattern matches no text a JSON string can hold' };
        return { ok: true, gbnf: out.gbnf };
      } catch (err) {
        if (!(err instanceof TooBig) || cap === 0) throw err;
      }
    }
  } catch (err) {
    const why = err instanceof Refusal ? err.message : `the pattern could not be read: ${String(err)}`;
    return { ok: false, why };
  }
}
