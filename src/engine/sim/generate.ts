// The sim's "model": deterministic text and vectors from a prompt and a seed.
// Kept apart from the HTTP server so that the rule a test relies on (same
// prompt and seed give the same words; another seed gives others) lives in
// one small place, and so that the hot path only indexes precomputed tables.
//
// Rules, for anyone computing an expected answer by hand:
// - A prompt is hashed with 32-bit FNV-1a (chat: each message's role and
//   text, in order; completions: the prompt string, or its token ids).
// - Choice j of a prompt draws words from mulberry32 seeded with
//   mix(hash, seed, j); each draw picks one word of VOCABULARY. The first
//   token is the bare word, every later token is a space and the word.
// - prompt_tokens = ceil(characters / 4) of the prompt text (chat: the
//   messages' text parts added up, roles not counted); a prompt given as
//   token ids counts its ids. Cheap, deterministic and roughly the size a
//   real tokenizer gives English.

/** The words the sim speaks. Fixed: changing it changes every expected text. */
export const VOCABULARY: readonly string[] = Object.freeze(
  (
    'the of and to in is was for that on with as by at from his her they this which ' +
    'river stone light cloud field garden window letter morning evening winter summer ' +
    'quiet bright slow green silver golden narrow ancient gentle heavy simple open ' +
    'walks carries holds finds keeps turns builds reads writes sings listens waits ' +
    'across between under above beside through toward around beyond within ' +
    'engine token packet signal vector matrix kernel tensor buffer socket router replica ' +
    'cluster node shard pool fabric cache weight model prompt stream queue ' +
    'apple bread honey salt tea paper candle mirror ladder bridge harbor island ' +
    'mountain valley forest meadow desert ocean lantern compass anchor feather ' +
    'one two three four five six seven eight nine ten hundred thousand ' +
    'red blue amber violet crimson ivory copper bronze marble velvet ' +
    'north south east west early late always never often rarely ' +
    'dream memory story song answer question reason promise moment season'
  ).split(' '),
);

/** Each word as the first token and as a later token, already JSON-encoded for SSE templates. */
const FIRST_TOKEN_TEXT = VOCABULARY.slice();
const NEXT_TOKEN_TEXT = VOCABULARY.map((w) => ` ${w}`);
export const FIRST_TOKEN_JSON: readonly string[] = FIRST_TOKEN_TEXT.map((w) => JSON.stringify(w));
export const NEXT_TOKEN_JSON: readonly string[] = NEXT_TOKEN_TEXT.map((w) => JSON.stringify(w));

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

/** Folds `text` into a running 32-bit FNV-1a hash; start from `fnvStart()`. */
export function fnvUpdate(hash: number, text: string): number {
  let h = hash;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, FNV_PRIME);
  }
  return h >>> 0;
}

export function fnvStart(): number {
  return FNV_OFFSET;
}

/** Folds one 32-bit integer (a token id, a separator) into the hash. */
export function fnvUpdateInt(hash: number, value: number): number {
  let h = hash;
  for (let shift = 0; shift < 32; shift += 8) {
    h ^= (value >>> shift) & 0xff;
    h = Math.imul(h, FNV_PRIME);
  }
  return h >>> 0;
}

/** The 32-bit state a choice's word stream starts from. */
export function mixSeed(promptHash: number, seed: number, choiceIndex: number): number {
  let h = fnvUpdateInt(fnvUpdateInt(fnvUpdateInt(fnvStart(), promptHash), seed | 0), choiceIndex);
  // A final avalanche so that neighbouring seeds start far apart.
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  return h >>> 0;
}

/**
 * mulberry32 over a mutable state: small, fast, and good enough to look
 * random. Returns an integer in [0, 2^32).
 */
export function nextRandom(state: { s: number }): number {
  state.s = (state.s + 0x6d2b79f5) | 0;
  let t = state.s;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return (t ^ (t >>> 14)) >>> 0;
}

export function promptTokensOfText(chars: number): number {
  return Math.ceil(chars / 4);
}

export type FinishReason = 'stop' | 'length';

/**
 * One choice being generated, token by token. With stop strings it keeps the
 * text so far and holds back the last (longest stop − 1) characters, because
 * they may be the start of a stop string that the next token completes: what
 * it hands out is then exactly the full text cut before the first stop, as
 * vLLM does, streamed or not.
 */
export class ChoiceGenerator {
  readonly index: number;
  /** Tokens generated so far, the one that completed a stop string included. */
  tokens = 0;
  finishReason: FinishReason | null = null;
  private readonly rng: { s: number };
  private readonly maxTokens: number;
  private readonly stops: readonly string[];
  private readonly holdBackChars: number;
  private text = '';
  private handedOut = 0;

  constructor(index: number, state: number, maxTokens: number, stops: readonly string[]) {
    this.index = index;
    this.rng = { s: state };
    this.maxTokens = maxTokens;
    this.stops = stops;
    let longest = 0;
    for (const s of stops) longest = Math.max(longest, s.length);
    this.holdBackChars = longest > 0 ? longest - 1 : 0;
    if (maxTokens <= 0) this.finishReason = 'length';
  }

  /**
   * Generates one token. Without stop strings returns the vocabulary index
   * (the caller uses the precomputed JSON); with them returns the text to
   * hand out now, possibly '' while it is held back.
   */
  nextWord(): number {
    const word = nextRandom(this.rng) % VOCABULARY.length;
    this.tokens++;
    if (this.tokens >= this.maxTokens) this.finishReason = 'length';
    return word;
  }

  /** Whether stop strings apply, so the caller must use `nextText()` instead of `nextWord()`. */
  get hasStops(): boolean {
    return this.stops.length > 0;
  }

  nextText(): string {
    const first = this.tokens === 0;
    const word = nextRandom(this.rng) % VOCABULARY.length;
    this.tokens++;
    const before = this.text.length;
    this.text += first ? FIRST_TOKEN_TEXT[word]! : NEXT_TOKEN_TEXT[word]!;
    let cut = -1;
    const from = Math.max(0, before - this.holdBackChars);
    for (const stop of this.stops) {
      const at = this.text.indexOf(stop, from);
      if (at !== -1 && (cut === -1 || at < cut)) cut = at;
    }
    let upTo: number;
    if (cut !== -1) {
      this.finishReason = 'stop';
      upTo = cut;
    } else if (this.tokens >= this.maxTokens) {
      this.finishReason = 'length';
      upTo = this.text.length;
    } else {
      upTo = this.text.length - this.holdBackChars;
    }
    if (upTo <= this.handedOut) return '';
    const out = this.text.slice(this.handedOut, upTo);
    this.handedOut = upTo;
    return out;
  }

  /** Generates the rest at once: the whole text a non-streamed answer carries. */
  rest(): string {
    if (this.hasStops) {
      let out = '';
      while (this.finishReason === null) out += this.nextText();
      return out;
    }
    const parts: string[] = [];
    while (this.finishReason === null) {
      const first = this.tokens === 0;
      const word = this.nextWord();
      parts.push(first ? FIRST_TOKEN_TEXT[word]! : NEXT_TOKEN_TEXT[word]!);
    }
    return parts.join('');
  }
}

/**
 * A deterministic unit vector for one input: `dimensions` components drawn
 * from the input's hash and the seed, normalised to length 1.
 */
export function embeddingOf(inputHash: number, seed: number, dimensions: number): Float32Array {
  const rng = { s: mixSeed(inputHash, seed, 0x454d42) };
  const out = new Float32Array(dimensions);
  let sumSquares = 0;
  for (let i = 0; i < dimensions; i++) {
    const v = nextRandom(rng) / 0x80000000 - 1;
    out[i] = v;
    sumSquares += v * v;
  }
  const norm = Math.sqrt(sumSquares) || 1;
  for (let i = 0; i < dimensions; i++) out[i] = out[i]! / norm;
  return out;
}
