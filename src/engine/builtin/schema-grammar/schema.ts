// A client's JSON Schema as one GBNF grammar that writes only JSON meeting
// it: what the builtin engine puts a structured answer or a forced tool call
// under. node-llama-cpp's own schema grammars ignore what they do not know
// (ranges, patterns, most formats), which the engine used to answer with a
// 400; this walk enforces those in the grammar, and names in `loose` what a
// grammar can only approximate (multipleOf, uniqueItems, a regex with a
// lookahead, oneOf's "exactly one"), so that the engine validates such
// answers and writes again once rather than refusing the schema. A schema
// that can never be met (false, a $ref to nowhere, minLength above
// maxLength) is a 400 naming where it is.
//
// The grammar writes compact JSON (no whitespace), every declared property
// in the order given, and numbers within numbers.ts's bounds.
import { LlmgwError } from '../../../errors/index.js';
import { BOUNDED_INTEGER, BOUNDED_NUMBER } from './numbers.js';
import { FORMAT_GRAMMARS } from './formats.js';
import { integerRange, MAX_WRITTEN_INTEGER, numberRange, type Bound } from './ranges.js';
import { patternGrammar } from './regex.js';

export interface SchemaGrammar {
  /** GBNF whose rule `root` writes the answer. */
  gbnf: string;
  /** Where the grammar only approximates the schema (`param.path.keyword`); empty = every answer it writes validates. */
  loose: string[];
}

type Schema = Record<string, unknown>;

/** Words that describe without constraining; never a reason to check an answer. */
const ANNOTATIONS = new Set([
  'title',
  'description',
  '$schema',
  '$id',
  '$anchor',
  '$comment',
  'default',
  'examples',
  'deprecated',
  'readOnly',
  'writeOnly',
  'strict',
  '$defs',
  'definitions',
  'contentMediaType',
  'contentEncoding',
]);
/** Keywords the walk turns into grammar (some only in part; those add to `loose` themselves). */
const HANDLED = new Set([
  'type',
  'nullable',
  'enum',
  'const',
  'anyOf',
  'oneOf',
  'allOf',
  '$ref',
  'properties',
  'required',
  'additionalProperties',
  'minProperties',
  'maxProperties',
  'items',
  'prefixItems',
  'additionalItems',
  'minItems',
  'maxItems',
  'minLength',
  'maxLength',
  'pattern',
  'format',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
]);
const TYPES = new Set(['string', 'number', 'integer', 'boolean', 'null', 'object', 'array']);

/** The rules every grammar may use, by name; added to the text only when used. */
const BASE_RULES: Readonly<Record<string, string>> = {
  // A JSON string's character, in its subset with no \u escapes: a pair of them would count as one
  // character to a validator and two to a length bound here.
  char: '[^"\\\\\\x00-\\x1f] | "\\\\" ["\\\\/bfnrt]',
  string: '"\\"" char* "\\""',
  number: BOUNDED_NUMBER,
  integer: BOUNDED_INTEGER,
  boolean: '"true" | "false"',
  null: '"null"',
  value: 'object | array | string | number | boolean | null',
  object: '"{" (string ":" value ("," string ":" value)*)? "}"',
  array: '"[" (value ("," value)*)? "]"',
};

/** The base rules each base rule's body names, so using one brings those along. */
const BASE_USES: Readonly<Record<string, readonly string[]>> = {
  string: ['char'],
  value: ['object', 'array', 'string', 'number', 'boolean', 'null'],
  object: ['string', 'value'],
  array: ['value'],
};

function refused(param: string, message: string): LlmgwError {
  return new LlmgwError('LLMGW_BAD_REQUEST', message, { context: { param } });
}

/** `text` as a GBNF string literal. */
export function literal(text: string): string {
  return `"${text.replace(/[\\"]/g, (c) => `\\${c}`).replace(/[\n\r\t]/g, (c) => ({ '\n': '\\n', '\r': '\\r', '\t': '\\t' })[c]!)}"`;
}

/** `x` repeated from `min` to `max` times (max null = without end), in GBNF. */
function repeat(x: string, min: number, max: number | null): string {
  if (max === null) return min === 0 ? `${x}*` : min === 1 ? `${x}+` : `${x}{${min},}`;
  if (min === max) return min === 1 ? x : `${x}{${min}}`;
  return min === 0 && max === 1 ? `${x}?` : `${x}{${min},${max}}`;
}

function alternatives(parts: string[]): string {
  return parts.length === 1 ? parts[0]! : `(${parts.join(' | ')})`;
}

function isSchemaObject(value: unknown): value is Schema {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function count(schema: Schema, key: string, at: string): number | undefined {
  const value = schema[key];
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0)
    throw refused(`${at}.${key}`, `${key} at ${at} must be a whole number, 0 or more`);
  return value;
}

/**
 * `schema` (sent as `param`) as a grammar, or a 400 naming where it can
 * never be met. Unbounded repetitions inside a `pattern` are capped at
 * `maxRepeat` so a model cannot write one forever.
 */
export function schemaGrammar(schema: unknown, param: string, maxRepeat = 16): SchemaGrammar {
  const walk = new Walk(schema, maxRepeat);
  const root = walk.value(schema, param);
  const lines = [`root ::= ${root}`];
  for (const [name, body] of walk.rules) lines.push(`${name} ::= ${body}`);
  for (const name of walk.baseUsed) lines.push(`${name} ::= ${BASE_RULES[name]}`);
  return { gbnf: lines.join('\n'), loose: walk.loose };
}

class Walk {
  readonly rules = new Map<string, string>();
  readonly baseUsed = new Set<string>();
  readonly loose: string[] = [];
  private readonly named = new Map<string, string>();
  private readonly refs = new Map<string, string>();
  private next = 0;

  constructor(
    private readonly root: unknown,
    private readonly maxRepeat: number,
  ) {}

  private base(name: keyof typeof BASE_RULES): string {
    if (!this.baseUsed.has(name)) {
      this.baseUsed.add(name);
      for (const used of BASE_USES[name] ?? []) this.base(used);
    }
    return name;
  }

  /** `body` as a rule of its own (one rule per distinct body), by its name. */
  private rule(hint: string, body: string): string {
    const known = this.named.get(body);
    if (known) return known;
    const name = `${hint}-${this.next++}`;
    this.named.set(body, name);
    this.rules.set(name, body);
    return name;
  }

  private approximate(at: string): void {
    this.loose.push(at);
  }

  /** The grammar for a value meeting `schema`, found at `at` (a request path, for messages). */
  value(schema: unknown, at: string): string {
    if (schema === true) return this.base('value');
    if (schema === false) throw refused(at, `${at} is false: no value meets it, so no answer could`);
    if (!isSchemaObject(schema)) throw refused(at, `${at} is not a JSON Schema (an object, or true or false)`);
    for (const key of Object.keys(schema))
      if (!HANDLED.has(key) && !ANNOTATIONS.has(key) && !key.startsWith('x-')) this.approximate(`${at}.${key}`);

    const siblings = Object.keys(schema).filter((k) => HANDLED.has(k));
    if (typeof schema.$ref === 'string') {
      if (siblings.length > 1) this.approximate(`${at}.$ref`);
      return this.ref(schema.$ref, `${at}.$ref`);
    }
    if ('$ref' in schema) throw refused(`${at}.$ref`, `$ref at ${at} must be a string like "#/$defs/name"`);
    const nullable = schema.nullable === true;
    const plain = this.nonNull(schema, at);
    return nullable ? alternatives([plain, this.base('null')]) : plain;
  }

  private nonNull(schema: Schema, at: string): string {
    if ('const' in schema) return literal(JSON.stringify(schema.const));
    if ('enum' in schema) {
      if (!Array.isArray(schema.enum) || schema.enum.length === 0)
        throw refused(`${at}.enum`, `enum at ${at} must be a non-empty list of values`);
      return alternatives(schema.enum.map((v) => literal(JSON.stringify(v))));
    }
    const { anyOf, oneOf, allOf } = schema;
    if (allOf !== undefined) return this.value(this.merged(schema, at), at);
    const union = anyOf ?? oneOf;
    if (union !== undefined) {
      const key = anyOf !== undefined ? 'anyOf' : 'oneOf';
      if (!Array.isArray(union) || union.length === 0)
        throw refused(`${at}.${key}`, `${key} at ${at} must be a non-empty list of schemas`);
      // A value may meet two branches of a oneOf, which then fails it: checked after.
      if (key === 'oneOf') this.approximate(`${at}.oneOf`);
      const { anyOf: _a, oneOf: _o, ...rest } = schema;
      const shared = Object.keys(rest).some((k) => HANDLED.has(k));
      return alternatives(
        union.map((branch, i) =>
          this.value(shared && isSchemaObject(branch) ? { ...rest, ...branch } : branch, `${at}.${key}[${i}]`),
        ),
      );
    }
    const type = schema.type ?? inferredType(schema);
    if (type === undefined) {
      if (Object.keys(schema).some((k) => HANDLED.has(k) && k !== 'nullable')) this.approximate(`${at}.type`);
      return this.base('value');
    }
    const types = Array.isArray(type) ? type : [type];
    if (types.length === 0)
      throw refused(`${at}.type`, `type at ${at} is an empty list: no value has none of the types`);
    return alternatives(
      types.map((t) => {
        if (typeof t !== 'string' || !TYPES.has(t))
          throw refused(`${at}.type`, `type ${JSON.stringify(t)} at ${at} is not a JSON Schema type`);
        return this.typed(t, schema, at);
      }),
    );
  }

  private typed(type: string, schema: Schema, at: string): string {
    switch (type) {
      case 'string':
        return this.string(schema, at);
      case 'integer':
      case 'number':
        return this.number(schema, at, type === 'integer');
      case 'boolean':
        return this.base('boolean');
      case 'null':
        return this.base('null');
      case 'object':
        return this.object(schema, at);
      default:
        return this.array(schema, at);
    }
  }

  private string(schema: Schema, at: string): string {
    const min = count(schema, 'minLength', at) ?? 0;
    const max = count(schema, 'maxLength', at) ?? null;
    if (max !== null && min > max)
      throw refused(`${at}.minLength`, `minLength ${min} at ${at} is above its maxLength ${max}: no string meets both`);
    const { format, pattern } = schema;
    let content: string | undefined;
    if (typeof format === 'string' && FORMAT_GRAMMARS[format]) content = FORMAT_GRAMMARS[format];
    else if (format !== undefined) this.approximate(`${at}.format`);
    if (pattern !== undefined) {
      if (typeof pattern !== 'string') throw refused(`${at}.pattern`, `pattern at ${at} must be a string`);
      if (content !== undefined) this.approximate(`${at}.pattern`);
      else {
        const grammar = patternGrammar(pattern, this.maxRepeat);
        if (grammar.ok) content = grammar.gbnf;
        else this.approximate(`${at}.pattern`);
      }
    }
    if (content === undefined) return this.rule('string', `"\\"" ${repeat(this.base('char'), min, max)} "\\""`);
    if (min > 0 || max !== null) this.approximate(`${at}.${min > 0 ? 'minLength' : 'maxLength'}`);
    return this.rule('string', `"\\"" (${content}) "\\""`);
  }

  private number(schema: Schema, at: string, integer: boolean): string {
    const lo = bound(schema, 'minimum', 'exclusiveMinimum', at);
    const hi = bound(schema, 'maximum', 'exclusiveMaximum', at);
    if (integer) {
      const from = lo === null ? -MAX_WRITTEN_INTEGER : lo.exclusive ? Math.floor(lo.value) + 1 : Math.ceil(lo.value);
      const to = hi === null ? MAX_WRITTEN_INTEGER : hi.exclusive ? Math.ceil(hi.value) - 1 : Math.floor(hi.value);
      if (from > to) throw refused(at, `no integer at ${at} lies between its minimum and maximum`);
      const clamped = [Math.max(from, -MAX_WRITTEN_INTEGER), Math.min(to, MAX_WRITTEN_INTEGER)] as const;
      if (clamped[0] > clamped[1])
        throw refused(at, `the range at ${at} lies beyond the ±${MAX_WRITTEN_INTEGER} llmgw writes`);
      if (clamped[0] === -MAX_WRITTEN_INTEGER && clamped[1] === MAX_WRITTEN_INTEGER) return this.base('integer');
      return this.rule('integer', integerRange(clamped[0], clamped[1]));
    }
    if (lo === null && hi === null) return this.base('number');
    if (lo && hi && (lo.value > hi.value || (lo.value === hi.value && (lo.exclusive || hi.exclusive))))
      throw refused(at, `no number at ${at} lies between its minimum and maximum`);
    // Bounds with a fraction narrow to whole ones inside them, so the grammar writes a subset; when nothing
    // whole is left (0.2 to 0.8), it widens to the whole numbers around them and answers are checked.
    const narrowed = [whole(lo, 'up'), whole(hi, 'down')] as const;
    const range = numberRange(narrowed[0], narrowed[1]);
    if (range !== null) return this.rule('number', range);
    this.approximate(`${at}.minimum`);
    return this.rule('number', numberRange(whole(lo, 'down'), whole(hi, 'up')) ?? BOUNDED_NUMBER);
  }

  private object(schema: Schema, at: string): string {
    const properties = schema.properties ?? {};
    if (!isSchemaObject(properties))
      throw refused(`${at}.properties`, `properties at ${at} must be an object of schemas`);
    const additional = schema.additionalProperties;
    const declared: [string, unknown][] = Object.entries(properties);
    const required = schema.required ?? [];
    if (!Array.isArray(required)) throw refused(`${at}.required`, `required at ${at} must be a list of property names`);
    for (const name of required) {
      if (typeof name !== 'string') throw refused(`${at}.required`, `required at ${at} must list property names`);
      if (name in properties) continue;
      if (additional === false)
        throw refused(
          `${at}.required`,
          `required at ${at} names "${name}", which properties lacks while additionalProperties is false: no object meets both`,
        );
      declared.push([name, isSchemaObject(additional) ? additional : true]);
    }
    const min = count(schema, 'minProperties', at);
    const max = count(schema, 'maxProperties', at);
    if (declared.length > 0) {
      if ((min !== undefined && min > declared.length) || (max !== undefined && max < declared.length))
        this.approximate(`${at}.${max !== undefined && max < declared.length ? 'maxProperties' : 'minProperties'}`);
      const pairs = declared.map(
        ([name, sub]) => `${literal(JSON.stringify(name))} ":" ${this.value(sub, `${at}.properties.${name}`)}`,
      );
      return this.rule('object', `"{" ${pairs.join(' "," ')} "}"`);
    }
    if (additional === false) return '"{" "}"';
    // A map: keys the model picks. Two equal keys collapse into one when parsed, so a floor of several is checked.
    if ((min ?? 0) > 1) this.approximate(`${at}.minProperties`);
    const entry = this.rule(
      'entry',
      `${this.base('string')} ":" ${isSchemaObject(additional) ? this.value(additional, `${at}.additionalProperties`) : this.base('value')}`,
    );
    return this.rule('object', `"{" ${this.list(entry, min ?? 0, max ?? null)} "}"`);
  }

  private array(schema: Schema, at: string): string {
    // Draft 7 wrote tuples as a list under items, with additionalItems for the rest.
    const tuple = Array.isArray(schema.items);
    const prefix = (tuple ? schema.items : (schema.prefixItems ?? [])) as unknown[];
    if (!Array.isArray(prefix)) throw refused(`${at}.prefixItems`, `prefixItems at ${at} must be a list of schemas`);
    const rest = tuple ? schema.additionalItems : schema.items;
    const min = count(schema, 'minItems', at) ?? 0;
    const max = count(schema, 'maxItems', at) ?? null;
    if (max !== null && min > max)
      throw refused(`${at}.minItems`, `minItems ${min} at ${at} is above its maxItems ${max}: no list meets both`);
    const written = prefix.slice(0, max ?? prefix.length).map((sub, i) => this.value(sub, `${at}.prefixItems[${i}]`));
    // Past the prefix: the items schema, or (a tuple without one) nothing more, which is a subset of "anything".
    const more =
      rest === false || (prefix.length > 0 && rest === undefined) ? null : this.value(rest ?? true, `${at}.items`);
    const extraMin = Math.max(0, min - written.length);
    const extraMax = max === null ? null : Math.max(0, max - written.length);
    if (more === null) {
      if (extraMin > 0) this.approximate(`${at}.minItems`);
      return this.rule('array', `"[" ${written.join(' "," ')} "]"`);
    }
    if (written.length === 0) return this.rule('array', `"[" ${this.list(more, extraMin, extraMax)} "]"`);
    const tail = extraMax === 0 ? '' : ` ${repeat(`("," ${more})`, extraMin, extraMax)}`;
    return this.rule('array', `"[" ${written.join(' "," ')}${tail} "]"`);
  }

  /** From `min` to `max` (null = no end) comma-separated `item`s. */
  private list(item: string, min: number, max: number | null): string {
    if (max === 0) return '';
    if (max === 1) return min === 0 ? `(${item})?` : item;
    const rest = repeat(`("," ${item})`, Math.max(0, min - 1), max === null ? null : max - 1);
    const some = `${item} ${rest}`;
    return min === 0 ? `(${some})?` : some;
  }

  /** A JSON pointer into the whole schema, as a rule; recursion works through the name. */
  private ref(ref: string, at: string): string {
    const known = this.refs.get(ref);
    if (known) return known;
    const target = resolvePointer(this.root, ref);
    if (target === undefined)
      throw refused(at, `${at} points to ${ref}, which the schema does not have; point inside it, as "#/$defs/name"`);
    const name = `ref-${this.next++}`;
    this.refs.set(ref, name);
    this.rules.set(name, '');
    this.rules.set(name, this.value(target, ref));
    return name;
  }

  /** allOf's schemas and the rest folded into one; where two say different things of one keyword, answers are checked. */
  private merged(schema: Schema, at: string): Schema {
    const { allOf, ...rest } = schema;
    if (!Array.isArray(allOf) || allOf.length === 0)
      throw refused(`${at}.allOf`, `allOf at ${at} must be a non-empty list of schemas`);
    const out: Schema = { ...rest };
    for (const [i, part] of allOf.entries()) {
      const sub =
        typeof part === 'object' && part !== null && '$ref' in part
          ? resolvePointer(this.root, String((part as Schema).$ref))
          : part;
      if (!isSchemaObject(sub)) throw refused(`${at}.allOf[${i}]`, `allOf[${i}] at ${at} must be a schema object`);
      for (const [key, value] of Object.entries(sub)) {
        if (key === 'properties' && isSchemaObject(value))
          out.properties = { ...(isSchemaObject(out.properties) ? out.properties : {}), ...value };
        else if (key === 'required' && Array.isArray(value))
          out.required = [...new Set([...(Array.isArray(out.required) ? out.required : []), ...value])];
        else if (key in out && JSON.stringify(out[key]) !== JSON.stringify(value))
          this.approximate(`${at}.allOf[${i}].${key}`);
        else out[key] = value;
      }
    }
    return out;
  }
}

/** What a schema without `type` must be, from the keywords only one type has; undefined = any. */
function inferredType(schema: Schema): string | undefined {
  if ('properties' in schema || 'additionalProperties' in schema || 'required' in schema) return 'object';
  if ('items' in schema || 'prefixItems' in schema) return 'array';
  if ('pattern' in schema || 'format' in schema || 'minLength' in schema || 'maxLength' in schema) return 'string';
  if ('minimum' in schema || 'maximum' in schema) return 'number';
  return undefined;
}

/** One side of a range: the tighter of the inclusive and exclusive keywords (draft 4's boolean form read too). */
function bound(schema: Schema, inclusiveKey: string, exclusiveKey: string, at: string): Bound | null {
  const inclusive = schema[inclusiveKey];
  const exclusive = schema[exclusiveKey];
  for (const [key, value] of [
    [inclusiveKey, inclusive],
    [exclusiveKey, exclusive],
  ] as const)
    if (value !== undefined && typeof value !== 'boolean' && (typeof value !== 'number' || !Number.isFinite(value)))
      throw refused(`${at}.${key}`, `${key} at ${at} must be a number`);
  const candidates: Bound[] = [];
  if (typeof inclusive === 'number') candidates.push({ value: inclusive, exclusive: exclusive === true });
  if (typeof exclusive === 'number') candidates.push({ value: exclusive, exclusive: true });
  if (candidates.length === 0) return null;
  const lower = inclusiveKey === 'minimum';
  return candidates.reduce((a, b) =>
    a.value === b.value ? (a.exclusive ? a : b) : lower === a.value > b.value ? a : b,
  );
}

/**
 * A bound moved to a whole number: `up` to the next one at or above it,
 * `down` to the one at or below; a bound that moved is now met inclusively.
 * Bounds past what llmgw writes are dropped (null), which changes nothing.
 */
function whole(b: Bound | null, direction: 'up' | 'down'): Bound | null {
  if (b === null || Math.abs(b.value) > MAX_WRITTEN_INTEGER) return null;
  if (Number.isInteger(b.value)) return b;
  return { value: direction === 'up' ? Math.ceil(b.value) : Math.floor(b.value), exclusive: false };
}

/** What a JSON pointer (`#`, `#/$defs/a`, with ~0 ~1 and %-escapes) names in `root`; undefined = nothing. */
function resolvePointer(root: unknown, ref: string): unknown {
  if (!ref.startsWith('#')) return undefined;
  const path = ref.slice(1);
  if (path === '') return root;
  if (!path.startsWith('/')) return undefined;
  let node = root;
  for (const raw of path.slice(1).split('/')) {
    const key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    if (typeof node !== 'object' || node === null || !(key in node)) return undefined;
    node = (node as Schema)[key];
  }
  return node;
}
