// Regression tests for schemas refused over `pattern` (issue #35): zod's email, uuid, ipv4 and date-time all carry a
// pattern, and the builtin engine answered 400 because no grammar enforced it. Each pattern here must become a GBNF
// expression that llama.cpp (through node-llama-cpp) parses, whose every string matches the regex once read back from
// JSON (a sampler walks the expression at random), that takes the examples the caps leave in and refuses the misses.
import type { LlamaGrammar } from 'node-llama-cpp';
import { describe, expect, it } from 'vitest';
import { accepts, useLlama } from '../../../../test/support/builtin-engine.js';
import { patternGrammar } from './regex.js';

// As zod 4's z.toJSONSchema() writes them.
const ZOD_EMAIL = "^(?:[A-Za-z0-9_'+\\-]+\\.)*[A-Za-z0-9_'+\\-]*[A-Za-z0-9_+-]@(?:[A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$"; // prettier-ignore
const ZOD_UUID = '^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|00000000-0000-0000-0000-000000000000|ffffffff-ffff-ffff-ffff-ffffffffffff)$'; // prettier-ignore
const ZOD_IPV4 = '^(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])\\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])$'; // prettier-ignore
const ZOD_DATE = '(?:(?:\\d\\d[2468][048]|\\d\\d[13579][26]|\\d\\d0[48]|[02468][048]00|[13579][26]00)-02-29|\\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)|(?:02)-(?:0[1-9]|1\\d|2[0-8])))'; // prettier-ignore
const ZOD_DATETIME = `^${ZOD_DATE}T(?:(?:[01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(?:\\.\\d+)?(?:Z))$`;
const ZOD_TIME = '^(?:[01]\\d|2[0-3]):[0-5]\\d(?::[0-5]\\d(?:\\.\\d+)?)?$';
const ZOD_IPV6 = '^(([0-9a-fA-F]{1,4}:){7}[0-9a-fA-F]{1,4}|([0-9a-fA-F]{1,4}:){1,7}:|([0-9a-fA-F]{1,4}:){1,6}:[0-9a-fA-F]{1,4}|([0-9a-fA-F]{1,4}:){1,5}(:[0-9a-fA-F]{1,4}){1,2}|([0-9a-fA-F]{1,4}:){1,4}(:[0-9a-fA-F]{1,4}){1,3}|([0-9a-fA-F]{1,4}:){1,3}(:[0-9a-fA-F]{1,4}){1,4}|([0-9a-fA-F]{1,4}:){1,2}(:[0-9a-fA-F]{1,4}){1,5}|[0-9a-fA-F]{1,4}:((:[0-9a-fA-F]{1,4}){1,6})|:((:[0-9a-fA-F]{1,4}){1,7}|:))$'; // prettier-ignore

/**
 * A pattern, strings (as decoded from JSON) its grammar must take, strings it must refuse, and `left`: matches the
 * grammar leaves out on purpose (past a cap, or text around an unanchored match).
 */
const CASES: { pattern: string; match: string[]; miss: string[]; left?: string[] }[] = [
  { pattern: ZOD_EMAIL, match: ['a@b.co', "o'neil+x@mail.example.org", 'first.last@a-b.io'], miss: ['a@b', 'a b@c.de', '@x.io', 'a@b.c', 'a"b@c.de'] }, // prettier-ignore
  { pattern: ZOD_UUID, match: ['123e4567-e89b-12d3-a456-426614174000', '00000000-0000-0000-0000-000000000000', 'ffffffff-ffff-ffff-ffff-ffffffffffff'], miss: ['123e4567-e89b-92d3-a456-426614174000', '123e4567e89b12d3a456426614174000', 'g23e4567-e89b-12d3-a456-426614174000'] }, // prettier-ignore
  { pattern: ZOD_IPV4, match: ['0.0.0.0', '192.168.1.254', '255.255.255.255'], miss: ['256.1.1.1', '1.2.3', '01.2.3.4', '1.2.3.4.5'] }, // prettier-ignore
  { pattern: ZOD_IPV6, match: ['::', '2001:db8::1', 'fe80:0:0:0:0:0:0:1', '::ffff:1'], miss: [':', '2001:db8:::1', '12345::', 'g::'] }, // prettier-ignore
  { pattern: ZOD_DATETIME, match: ['2024-02-29T12:34:56Z', '1999-12-31T23:59:59.123Z'], miss: ['2023-02-29T12:34:56Z', '2024-13-01T00:00:00Z', '2024-01-01T24:00:00Z', '2024-01-01 00:00:00Z'] }, // prettier-ignore
  { pattern: `^${ZOD_DATE}$`, match: ['2000-02-29', '2023-04-30', '0001-01-01'], miss: ['1900-02-29', '2023-04-31', '2023-4-30'] }, // prettier-ignore
  { pattern: ZOD_TIME, match: ['00:00', '23:59:59', '12:30:00.5'], miss: ['24:00', '12:60', '1:00', '12:30:00.'] },
  { pattern: '^[A-Z]{3}-\\d{4}$', match: ['ABC-1234'], miss: ['AB-1234', 'abc-1234', 'ABC-123', 'ABCD-1234'] },
  { pattern: '^https?:\\/\\/[a-z.]+\\/?$', match: ['http://a.b', 'https://x.org/'], miss: ['ftp://a', 'http:/a'] },
  { pattern: '^\\d{3}-\\d{4}$', match: ['555-1234'], miss: ['5551234', '55-1234', '555-12345', '٣٣٣-1234'] },
  {
    pattern: '[a-z]+',
    match: ['a', 'hello', 'abcdefghijklmnop'],
    miss: ['', 'A', '123'],
    left: ['a1', 'a'.repeat(17)],
  },
  { pattern: '^(foo|bar)+$', match: ['foo', 'barfoo', 'foofoofoo'], miss: ['', 'fo', 'foob', 'baz'] },
  { pattern: '^[^@\\s]+@[^@\\s]+$', match: ['a@b', 'x.y@é€😀', 'a!#$%@[]'], miss: ['@b', 'a@', 'a b@c', 'a@b@c', 'a\n@b'] }, // prettier-ignore
  // Quotes, backslashes and control characters travel as JSON escapes.
  { pattern: '^say "\\\\hi\\\\"\\t\\n\\x01$', match: ['say "\\hi\\"\t\n\x01'], miss: ['say "hi"\t\n\x01', 'say \\hi\\\t\n\x01'] }, // prettier-ignore
  { pattern: '^[\\\\"/]{2}[\\s]?\\.*(?<n>x|y)\\u{1F600}\\uD83D\\uDE00$', match: ['\\"x😀😀', '//\t..y😀😀', '"" y😀😀'], miss: ['\\"\\x😀😀', 'x😀😀'] }, // prettier-ignore
  { pattern: '^(?:a|b)*?c{2,}[^\\w-]?$', match: ['cc', 'abcccc', 'cc!'], miss: ['c', 'acc-', 'abc'] },
  { pattern: '^$', match: [''], miss: ['a'] },
  { pattern: '', match: [''], miss: [], left: ['a'] },
];

/**
 * A random string of the language of a GBNF expression of the kind patternGrammar writes (literals, classes,
 * groups, `|`, `?`, `{m}`, `{m,n}`); anything else, an unbounded `*` or `+` included, throws.
 */
function sampler(gbnf: string): (random: () => number) => string {
  let i = 0;
  const pick = <T>(xs: readonly T[], random: () => number): T => xs[Math.floor(random() * xs.length)] as T;
  const char = (): number => {
    if (gbnf[i] !== '\\') {
      const cp = gbnf.codePointAt(i) ?? 0;
      i += cp > 0xffff ? 2 : 1;
      return cp;
    }
    const esc = gbnf[i + 1] ?? '';
    i += 2;
    const width = ({ x: 2, u: 4, U: 8 } as Record<string, number>)[esc];
    if (width) return parseInt(gbnf.slice(i, (i += width)), 16);
    return ({ n: 10, t: 9, r: 13 } as Record<string, number>)[esc] ?? esc.charCodeAt(0);
  };
  // Characters to try against a negated class: what ought to be refused (quote, backslash, controls) and more.
  const POOL = [...Array.from({ length: 0x7f }, (_, k) => k), 0xe9, 0x20ac, 0x2028, 0x1f600];
  type Gen = (random: () => number) => string;
  const space = () => {
    while (gbnf[i] === ' ') i++;
  };
  const atom = (): Gen => {
    const c = gbnf[i++];
    if (c === '"') {
      let s = '';
      while (gbnf[i] !== '"') s += String.fromCodePoint(char());
      i++;
      return () => s;
    }
    if (c === '[') {
      const negated = gbnf[i] === '^';
      if (negated) i++;
      const ranges: [number, number][] = [];
      while (gbnf[i] !== ']') {
        const lo = char();
        ranges.push([lo, gbnf[i] === '-' && gbnf[i + 1] !== ']' ? (i++, char()) : lo]);
      }
      i++;
      const inside = (cp: number) => ranges.some(([lo, hi]) => cp >= lo && cp <= hi);
      const allowed = POOL.filter((cp) => inside(cp) !== negated);
      return (random) => {
        if (negated) return String.fromCodePoint(pick(allowed, random));
        const [lo, hi] = pick(ranges, random);
        return String.fromCodePoint(lo + Math.floor(random() * (hi - lo + 1)));
      };
    }
    if (c === '(') {
      const inner = alt();
      expect(gbnf[i++], `a ")" in ${gbnf}`).toBe(')');
      return inner;
    }
    throw new Error(`the sampler does not know "${c}" at ${i - 1} of ${gbnf}`);
  };
  const quantified = (): Gen => {
    const body = atom();
    const m = /^(?:\?|\{(\d+)(?:,(\d+))?\})/.exec(gbnf.slice(i));
    if (!m) return body;
    i += m[0].length;
    const min = m[1] === undefined ? 0 : Number(m[1]);
    const max = m[1] === undefined ? 1 : Number(m[2] ?? m[1]);
    return (random) => {
      let out = '';
      for (let n = min + Math.floor(random() * (max - min + 1)); n > 0; n--) out += body(random);
      return out;
    };
  };
  const seq = (): Gen => {
    const items: Gen[] = [];
    space();
    while (i < gbnf.length && gbnf[i] !== '|' && gbnf[i] !== ')') {
      items.push(quantified());
      space();
    }
    return (random) => items.map((g) => g(random)).join('');
  };
  const alt = (): Gen => {
    const alts = [seq()];
    while (gbnf[i] === '|') {
      i++;
      alts.push(seq());
    }
    return (random) => pick(alts, random)(random);
  };
  const root = alt();
  expect(i, `the whole of ${gbnf} read`).toBe(gbnf.length);
  return root;
}

/** A seeded generator (mulberry32), so a failure repeats. */
function seeded(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const llama = useLlama();

/** The pattern's expression as the value of a JSON string, the way the schema converter will embed it. */
async function stringGrammar(pattern: string, maxRepeat?: number): Promise<{ gbnf: string; grammar: LlamaGrammar }> {
  const result = patternGrammar(pattern, maxRepeat);
  if (!result.ok) throw new Error(`${pattern} was refused: ${result.why}`);
  const grammar = await llama().createGrammar({ grammar: `root ::= "\\"" (${result.gbnf}) "\\""` });
  return { gbnf: result.gbnf, grammar };
}

describe('patternGrammar', () => {
  it.each(CASES)('$pattern: every string it writes matches; examples in, misses out', async (c) => {
    const regex = new RegExp(c.pattern, 'u');
    const { gbnf, grammar } = await stringGrammar(c.pattern);
    const sample = sampler(gbnf);
    const random = seeded(35);
    for (let n = 0; n < 40; n++) {
      const json = `"${sample(random)}"`;
      expect(accepts(grammar, json), `llama.cpp takes the sampled ${json} of ${gbnf}`).toBe(true);
      const value = JSON.parse(json) as string;
      expect(regex.test(value), `the sampled ${json} of ${gbnf} matches`).toBe(true);
    }
    for (const s of c.match) {
      expect(regex.test(s), `${JSON.stringify(s)} is an example of a match`).toBe(true);
      expect(accepts(grammar, JSON.stringify(s)), `${JSON.stringify(s)} taken by ${gbnf}`).toBe(true);
    }
    for (const s of c.miss) {
      expect(regex.test(s), `${JSON.stringify(s)} is an example of a miss`).toBe(false);
      expect(accepts(grammar, JSON.stringify(s)), `${JSON.stringify(s)} refused by ${gbnf}`).toBe(false);
    }
    for (const s of c.left ?? []) {
      expect(regex.test(s), `${JSON.stringify(s)} is an example of a match`).toBe(true);
      expect(accepts(grammar, JSON.stringify(s)), `${JSON.stringify(s)} left out by ${gbnf}`).toBe(false);
    }
  });

  it('turns random mixes of what it supports into grammars whose every string matches', async () => {
    const random = seeded(3521);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)] as T;
    const ATOMS = ['a', 'b', '\\d', '\\w', '\\s', '\\S', '\\W', '.', '[a-c]', '[^a-c]', '[^\\s"]', '"', '\\\\', '\\n', '\\u00e9', '\\.', '-']; // prettier-ignore
    const QUANTIFIERS = ['', '', '', '*', '+', '?', '{2}', '{1,3}', '{2,}', '*?'];
    const term = (depth: number): string =>
      (depth < 3 && random() < 0.25 ? `(?:${alt(depth + 1)})` : pick(ATOMS)) + pick(QUANTIFIERS);
    const seq = (depth: number) => Array.from({ length: 1 + Math.floor(random() * 3) }, () => term(depth)).join('');
    const alt = (depth: number) => (random() < 0.3 ? `${seq(depth)}|${seq(depth)}` : seq(depth));
    for (let n = 0; n < 60; n++) {
      const pattern = (random() < 0.5 ? '^' : '') + alt(0) + (random() < 0.5 ? '$' : '');
      const regex = new RegExp(pattern, 'u');
      const { gbnf, grammar } = await stringGrammar(pattern, 4);
      const sample = sampler(gbnf);
      for (let k = 0; k < 15; k++) {
        const json = `"${sample(random)}"`;
        expect(accepts(grammar, json), `llama.cpp takes the sampled ${json} of ${gbnf}`).toBe(true);
        expect(regex.test(JSON.parse(json) as string), `${json} of ${gbnf} matches ${pattern}`).toBe(true);
      }
    }
  });

  it('writes a quote, a backslash or a control character only as its JSON escape', async () => {
    const { grammar } = await stringGrammar('^[a"\\\\\\n]{1,3}$');
    for (const ok of ['\\"', '\\\\', '\\n', 'a\\"\\\\']) expect(accepts(grammar, `"${ok}"`), ok).toBe(true);
    for (const bad of ['"', '\\', '\n', '\\u000a', '\\/']) expect(accepts(grammar, `"${bad}"`), bad).toBe(false);
    // What a pattern only excludes ([^…], ., \S) it does not offer as escapes: no model is steered to write \u0001.
    const { grammar: anything } = await stringGrammar('^[^a]\\S.$');
    expect(accepts(anything, '"bcd"')).toBe(true);
    for (const escaped of ['\\"cd', 'b\\\\d', 'bc\\u0001'])
      expect(accepts(anything, `"${escaped}"`), escaped).toBe(false);
  });

  it('caps unbounded repetitions at maxRepeat, keeping their minimum', async () => {
    const { grammar } = await stringGrammar('^a+b{5,}c*$', 3);
    expect(accepts(grammar, '"aaabbbbbccc"')).toBe(true);
    expect(accepts(grammar, '"aaaabbbbb"'), 'a fourth a').toBe(false);
    expect(accepts(grammar, '"abbbb"'), 'fewer than five b').toBe(false);
    expect(accepts(grammar, '"abbbbbb"'), 'b past its minimum when the cap is lower').toBe(false);
  });

  it('keeps an explicit bound too large for llama.cpp bounded, and refuses a minimum it cannot hold', async () => {
    // llama.cpp reads a bound above 2,000 as "no bound": the grammar would let a model run on.
    const { grammar } = await stringGrammar('^a{0,5000}$');
    expect(accepts(grammar, `"${'a'.repeat(1000)}"`)).toBe(true);
    expect(accepts(grammar, `"${'a'.repeat(1001)}"`), 'past the explicit cap').toBe(false);
    const refused = patternGrammar('^a{3000}$');
    expect(refused.ok).toBe(false);
    if (!refused.ok) expect(refused.why).toMatch(/repetition at character 2.*3000 times/);
  });

  it('shrinks the caps of nested repetitions until llama.cpp takes the grammar', async () => {
    // At 1,000 a group of a{1,1000} repeated 1,000 times is far past llama.cpp's 2,000-rule limit.
    const { grammar } = await stringGrammar('^((a+b)+c)+$', 1000);
    expect(accepts(grammar, '"abc"')).toBe(true);
    expect(accepts(grammar, `"${'a'.repeat(20)}bc"`), 'the caps shrank, but not to nothing').toBe(true);
  });

  it.each([
    ['a(?=b)', /lookahead "\(\?=" at character 2/],
    ['a(?!b)', /lookahead "\(\?!" at character 2/],
    ['(?<=a)b', /lookbehind "\(\?<=" at character 1/],
    ['(?<!a)b', /lookbehind "\(\?<!" at character 1/],
    ['(a)\\1', /backreference "\\1" at character 4/],
    ['(?<x>a)\\k<x>', /backreference "\\k" at character 8/],
    ['\\bword\\b', /word boundary "\\b" at character 1/],
    ['a\\Bb', /word boundary "\\B" at character 2/],
    ['\\p{L}+', /property escape "\\p\{…\}" at character 1/],
    ['a^b', /"\^" at character 2 of the pattern is not at its start/],
    ['a$b', /"\$" at character 2 of the pattern is not at its end/],
    ['(^a)+', /"\^" at character 2/],
    ['[', /not a valid ECMAScript regular expression/],
    ['a{2,1}', /not a valid ECMAScript regular expression/],
    ['^[\\ud800-\\udfff]$', /matches no text a JSON string can hold/],
  ])('refuses %s, saying why', (pattern, why) => {
    const result = patternGrammar(pattern);
    expect(result.ok, pattern).toBe(false);
    if (!result.ok) expect(result.why).toMatch(why);
  });

  it('drops anchors only where they sit at the ends of every path', () => {
    for (const p of ['^a$|^b$', '(^a|b$)', '(?:^a)?b', '^^a$$']) expect(patternGrammar(p).ok, p).toBe(true);
  });
});
