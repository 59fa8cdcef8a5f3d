// Number ranges as grammar: JSON Schema's minimum, maximum and their
// exclusive forms turned into GBNF that writes only numbers inside them, so
// `z.number().int().min(1).max(10)` holds whatever the weights. Apart from
// the schema walk because this is arithmetic on digit strings (the classic
// range-to-pattern split), tested on its own against every number in a range.
//
// Every number written stays within numbers.ts's bounds: at most 15
// integer digits and 15 fraction digits, no exponent, so each is a finite
// double that reads back as written.

/** The largest integer the grammars write: 15 nines, below 2^53, so every one is a safe integer. */
export const MAX_WRITTEN_INTEGER = 999_999_999_999_999;

const FRACTION = '("." [0-9]{1,15})';
/** A fraction that is not zero: the digits end in a non-zero one. */
const NONZERO_FRACTION = '("." [0-9]{0,14} [1-9])';
/** A fraction that is zero, written or not: `5`, `5.0`, `5.000`. */
const ZERO_FRACTION = '("." "0"{1,15})?';

function digitClass(lo: string, hi: string): string {
  return lo === hi ? `"${lo}"` : `[${lo}-${hi}]`;
}

/** Alternatives in parentheses, or the one alone. */
function oneOf(parts: string[]): string {
  return parts.length === 1 ? parts[0]! : `(${parts.join(' | ')})`;
}

/** Digit strings of one length from `lo` to `hi` (both that length, lo <= hi). */
function sameLength(lo: string, hi: string): string {
  if (lo.length === 0) return '';
  if (lo === hi) return `"${lo}"`;
  if (lo[0] === hi[0]) return `"${lo[0]}" ${sameLength(lo.slice(1), hi.slice(1))}`.trim();
  const rest = lo.length - 1;
  const any = rest === 0 ? '' : ` [0-9]{${rest}}`;
  const loTail = lo.slice(1);
  const hiTail = hi.slice(1);
  // A first digit whose tails cover everything joins the middle run.
  const loFull = /^0*$/.test(loTail);
  const hiFull = /^9*$/.test(hiTail);
  const first = Number(lo[0]);
  const last = Number(hi[0]);
  const midLo = loFull ? first : first + 1;
  const midHi = hiFull ? last : last - 1;
  const parts: string[] = [];
  if (!loFull) parts.push(`"${lo[0]}" ${sameLength(loTail, '9'.repeat(rest))}`);
  if (midLo <= midHi) parts.push(`${digitClass(String(midLo), String(midHi))}${any}`);
  if (!hiFull) parts.push(`"${hi[0]}" ${sameLength('0'.repeat(rest), hiTail)}`);
  return oneOf(parts);
}

/** The naturals from `lo` to `hi` (0 <= lo <= hi), written without leading zeros. */
export function naturalRange(lo: number, hi: number): string {
  const parts: string[] = [];
  const loText = String(lo);
  const hiText = String(hi);
  for (let length = loText.length; length <= hiText.length; length++) {
    const from = length === loText.length ? loText : `1${'0'.repeat(length - 1)}`;
    const to = length === hiText.length ? hiText : '9'.repeat(length);
    parts.push(sameLength(from, to));
  }
  return oneOf(parts);
}

/** The integers from `lo` to `hi` inclusive (lo <= hi, both within MAX_WRITTEN_INTEGER). */
export function integerRange(lo: number, hi: number): string {
  const parts: string[] = [];
  if (hi >= 0) parts.push(naturalRange(Math.max(0, lo), hi));
  if (lo < 0) parts.push(`"-" ${naturalRange(Math.max(1, -hi), -lo)}`);
  return oneOf(parts);
}

/** One side of a number range: the bound and whether it is excluded. */
export interface Bound {
  value: number;
  exclusive: boolean;
}

/**
 * Non-negative numbers x (written `I` or `I.F`, no sign) with lo < x or
 * lo <= x, and x < hi or x <= hi (hi null = up to the largest written).
 * Both bounds are integers. Null when no number fits.
 */
function magnitudes(lo: Bound, hi: Bound | null): string | null {
  const parts: string[] = [];
  const top = hi === null ? MAX_WRITTEN_INTEGER : hi.value;
  if (hi !== null && lo.value === hi.value)
    return lo.exclusive || hi.exclusive ? null : `"${lo.value}" ${ZERO_FRACTION}`;
  // The integer part at the lower bound: any fraction, or (excluded) only a non-zero one.
  parts.push(`"${lo.value}" ${lo.exclusive ? NONZERO_FRACTION : `${FRACTION}?`}`);
  // Integer parts strictly between: any fraction.
  const innerHi = hi === null ? top : top - 1;
  if (lo.value + 1 <= innerHi) parts.push(`${integerRange(lo.value + 1, innerHi)} ${FRACTION}?`);
  // The integer part at the upper bound: only a zero fraction, and only when the bound is included.
  if (hi !== null && !hi.exclusive) parts.push(`"${hi.value}" ${ZERO_FRACTION}`);
  return oneOf(parts);
}

/**
 * Numbers (integer or fraction, no exponent) from `lo` to `hi`, where each
 * bound is an integer within MAX_WRITTEN_INTEGER or null for none. Null when
 * no number fits.
 */
export function numberRange(lo: Bound | null, hi: Bound | null): string | null {
  const min: Bound = lo ?? { value: -MAX_WRITTEN_INTEGER, exclusive: false };
  const max: Bound = hi ?? { value: MAX_WRITTEN_INTEGER, exclusive: false };
  if (min.value > max.value) return null;
  const parts: string[] = [];
  // Zero and up.
  if (max.value > 0 || (max.value === 0 && !max.exclusive)) {
    const from: Bound = min.value >= 0 ? min : { value: 0, exclusive: false };
    const positive = magnitudes(from, max);
    if (positive) parts.push(positive);
  }
  // Below zero: -x for x in the mirrored range.
  if (min.value < 0) {
    const from: Bound =
      max.value <= 0 ? { value: -max.value, exclusive: max.exclusive } : { value: 0, exclusive: true };
    const negative = magnitudes(from, { value: -min.value, exclusive: min.exclusive });
    if (negative) parts.push(`"-" ${negative}`);
  }
  return parts.length === 0 ? null : oneOf(parts);
}
