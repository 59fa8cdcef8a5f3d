// The sim's answers to the endpoints beside generation, in vLLM's shapes
// (llama.cpp's for a /tokenize that names `content`): rerank, score, audio
// transcriptions, tokenize and detokenize. Pure functions of the body, so
// the router's pass-through paths can be tested without a GPU and an answer
// can be computed by hand. Apart from server.ts, which only admits, paces
// and writes them.
//
// Rules:
// - Text is tokenized in chunks of 4 UTF-16 code units, so /tokenize's
//   count is the prompt_tokens chat and completions report for the same
//   text (generate.ts: ceil(characters / 4)); chat messages count their
//   text parts, roles not counted. A chunk's id packs its code units (each
//   below U+1FFF) as 13-bit digits, so /detokenize inverts /tokenize with
//   no table; a chunk with a higher code unit gets an id from a table this
//   engine keeps, above 2^52.
// - A rerank or score pair (query, document) scores the FNV-1a hash of both
//   texts mixed with the seed, as a number in [0, 1).
// - A transcription is "heard N bytes of NAME (fnv1a HEX)" of the uploaded
//   file, so a test can tell that the bytes arrived as sent.
import { LlmgwError } from '../../errors/index.js';
import type { ReadForm } from '../../http/multipart.js';
import { fnvStart, fnvUpdate, mixSeed, promptTokensOfText } from './generate.js';

/** An answer ready to write: what server.ts sends once the request is admitted. */
export interface PassthroughAnswer {
  readonly status: number;
  readonly contentType: string;
  readonly body: string;
  /** Tokens of the request's text, for the sim's prefill counter. */
  readonly promptTokens: number;
}

function bad(param: string, message: string): LlmgwError {
  return new LlmgwError('LLMGW_BAD_REQUEST', message, { context: { param } });
}

const JSON_TYPE = 'application/json';
const CHARS_PER_TOKEN = 4;
const DIGIT = 8192;
/** Ids from here up are chunks with a code unit above what 13-bit digits hold, numbered by the engine's table. */
const TABLE_BASE = 2 ** 52;
/** Ids from here up are such chunks hashed (encodeStable); the table never reaches them. */
const HASHED_BASE = 2 ** 52 + 2 ** 51;

/** The sim's tokenizer: per-engine state only for the rare chunk its packing cannot hold. */
export class SimTokenizer {
  private readonly table: string[] = [];
  private readonly ids = new Map<string, number>();

  encode(text: string): number[] {
    const out: number[] = [];
    for (let i = 0; i < text.length; i += CHARS_PER_TOKEN) out.push(this.idOf(text.slice(i, i + CHARS_PER_TOKEN)));
    return out;
  }

  /**
   * As encode(), but a chunk the packing cannot hold gets a hashed id
   * (from 2^52 + 2^51) instead of a table entry, so the simulated KV cache
   * tokenises every prompt without growing the table, and two sims give the
   * same ids for the same text. Equal to encode() for text whose code units
   * are all below 8191 (every alphabet but CJK and emoji).
   */
  encodeStable(text: string): number[] {
    const out: number[] = [];
    for (let i = 0; i < text.length; i += CHARS_PER_TOKEN) {
      const chunk = text.slice(i, i + CHARS_PER_TOKEN);
      let id = 0;
      let scale = 1;
      for (let k = 0; k < chunk.length; k++) {
        const unit = chunk.charCodeAt(k) + 1;
        if (unit >= DIGIT) {
          id = HASHED_BASE + fnvUpdate(fnvStart(), chunk);
          break;
        }
        id += unit * scale;
        scale *= DIGIT;
      }
      out.push(id);
    }
    return out;
  }

  /** The text of one id; null = no token this engine issued. */
  piece(id: number): string | null {
    if (!Number.isSafeInteger(id) || id <= 0) return null;
    if (id >= TABLE_BASE) return this.table[id - TABLE_BASE] ?? null;
    let text = '';
    for (let rest = id; rest > 0; rest = Math.floor(rest / DIGIT)) text += String.fromCharCode((rest % DIGIT) - 1);
    return text;
  }

  private idOf(chunk: string): number {
    let id = 0;
    let scale = 1;
    for (let k = 0; k < chunk.length; k++) {
      const unit = chunk.charCodeAt(k) + 1;
      if (unit >= DIGIT) return this.tableId(chunk);
      id += unit * scale;
      scale *= DIGIT;
    }
    return id;
  }

  private tableId(chunk: string): number {
    let id = this.ids.get(chunk);
    if (id === undefined) {
      id = TABLE_BASE + this.table.length;
      this.table.push(chunk);
      this.ids.set(chunk, id);
    }
    return id;
  }
}

/** The text of chat messages as the sim counts it: their text parts, in order. */
function messagesText(messages: unknown[]): string {
  let text = '';
  messages.forEach((m, i) => {
    const content = (m as { content?: unknown } | null)?.content;
    if (typeof content === 'string') text += content;
    else if (Array.isArray(content)) {
      for (const part of content)
        if (typeof (part as { text?: unknown } | null)?.text === 'string') text += (part as { text: string }).text;
    } else if (content !== undefined && content !== null)
      throw bad(`messages[${i}].content`, `messages[${i}].content: want a string or a list of content parts`);
  });
  return text;
}

/** POST /tokenize: vLLM's {count, max_model_len, tokens, token_strs?}, or llama.cpp's {tokens} for a body with `content`. */
export function tokenizeAnswer(
  o: Record<string, unknown>,
  tokenizer: SimTokenizer,
  maxModelLen: number,
): PassthroughAnswer {
  let text: string;
  if (typeof o.content === 'string') {
    const tokens = tokenizer.encode(o.content);
    return { status: 200, contentType: JSON_TYPE, body: JSON.stringify({ tokens }), promptTokens: 0 };
  }
  if (typeof o.prompt === 'string') text = o.prompt;
  else if (Array.isArray(o.messages) && o.messages.length > 0) text = messagesText(o.messages);
  else throw bad('prompt', 'prompt: is required (a string), or messages (a non-empty list of chat messages)');
  const tokens = tokenizer.encode(text);
  const answer: Record<string, unknown> = { count: tokens.length, max_model_len: maxModelLen, tokens };
  if (o.return_token_strs === true) answer.token_strs = tokens.map((t) => tokenizer.piece(t));
  return { status: 200, contentType: JSON_TYPE, body: JSON.stringify(answer), promptTokens: 0 };
}

/** POST /detokenize: vLLM's {prompt} (llama.cpp's {content} when the engine plays llama.cpp). */
export function detokenizeAnswer(
  o: Record<string, unknown>,
  tokenizer: SimTokenizer,
  llamacpp: boolean,
): PassthroughAnswer {
  const tokens = o.tokens;
  if (!Array.isArray(tokens)) throw bad('tokens', 'tokens: is required, a list of token ids');
  let text = '';
  tokens.forEach((t, i) => {
    const piece = typeof t === 'number' ? tokenizer.piece(t) : null;
    if (piece === null) throw bad('tokens', `tokens[${i}]: ${JSON.stringify(t)} is no token id this engine issued`);
    text += piece;
  });
  return {
    status: 200,
    contentType: JSON_TYPE,
    body: JSON.stringify(llamacpp ? { content: text } : { prompt: text }),
    promptTokens: 0,
  };
}

/** A document's text: a string, or an object with `text` (Cohere's and Jina's shape). */
function documentText(d: unknown, i: number): string {
  if (typeof d === 'string') return d;
  if (typeof (d as { text?: unknown } | null)?.text === 'string') return (d as { text: string }).text;
  throw bad('documents', `documents[${i}]: want a string or {"text": "..."}`);
}

/** A pair's score in [0, 1): the hash of both texts, mixed with the seed. */
function pairScore(a: string, b: string, seed: number): number {
  const hash = fnvUpdate(fnvUpdate(fnvStart(), a), `\u0000${b}`);
  return mixSeed(hash, seed, 0) / 2 ** 32;
}

/** POST /v1/rerank (and /rerank, /v2/rerank): vLLM's answer, results by relevance, best first. */
export function rerankAnswer(o: Record<string, unknown>, model: string, id: string, seed: number): PassthroughAnswer {
  if (typeof o.query !== 'string') throw bad('query', 'query: is required, a string');
  if (!Array.isArray(o.documents) || o.documents.length === 0)
    throw bad('documents', 'documents: is required, a non-empty list');
  const query = o.query;
  const texts = o.documents.map(documentText);
  const topN = typeof o.top_n === 'number' && o.top_n > 0 ? o.top_n : texts.length;
  let tokens = 0;
  const results = texts.map((text, index) => {
    tokens += promptTokensOfText(query.length + text.length);
    return { index, document: { text }, relevance_score: pairScore(query, text, seed) };
  });
  results.sort((x, y) => y.relevance_score - x.relevance_score || x.index - y.index);
  const body = { id, model, usage: { total_tokens: tokens }, results: results.slice(0, topN) };
  return { status: 200, contentType: JSON_TYPE, body: JSON.stringify(body), promptTokens: tokens };
}

/** POST /v1/score: vLLM's pairs (one against one, one against many, or many against as many), in order. */
export function scoreAnswer(o: Record<string, unknown>, model: string, id: string, seed: number): PassthroughAnswer {
  const side = (v: unknown, param: string): string[] => {
    if (typeof v === 'string') return [v];
    if (Array.isArray(v) && v.length > 0 && v.every((x) => typeof x === 'string')) return v as string[];
    throw bad(param, `${param}: is required, a string or a non-empty list of strings`);
  };
  const left = side(o.text_1, 'text_1');
  const right = side(o.text_2, 'text_2');
  if (left.length > 1 && left.length !== right.length) {
    throw bad(
      'text_2',
      `text_2: has ${right.length} texts for the ${left.length} of text_1; give as many, or one text_1`,
    );
  }
  let tokens = 0;
  const data = right.map((b, index) => {
    const a = left.length === 1 ? left[0]! : left[index]!;
    tokens += promptTokensOfText(a.length + b.length);
    return { index, object: 'score', score: pairScore(a, b, seed) };
  });
  const body = {
    id,
    object: 'list',
    created: Math.floor(Date.now() / 1000),
    model,
    data,
    usage: { prompt_tokens: tokens, total_tokens: tokens, completion_tokens: 0 },
  };
  return { status: 200, contentType: JSON_TYPE, body: JSON.stringify(body), promptTokens: tokens };
}

/** Audio bytes per second the sim assumes for usage in seconds (16 kHz, 16-bit mono, as Whisper takes it). */
const AUDIO_BYTES_PER_SECOND = 32_000;

/** POST /v1/audio/transcriptions: the form's file, heard deterministically; json (vLLM's, usage in seconds), text or verbose_json. */
export function transcriptionAnswer(form: ReadForm): PassthroughAnswer & { readonly model: string | undefined } {
  const file = form.files.get('file');
  if (!file) throw bad('file', 'file: is required, the audio as a file part named "file"');
  const bytes = file.bytes ?? Buffer.alloc(0);
  let hash = fnvStart();
  for (const b of bytes) hash = Math.imul(hash ^ b, 0x01000193) >>> 0;
  const text = `heard ${bytes.length} bytes of ${file.filename} (fnv1a ${hash.toString(16).padStart(8, '0')})`;
  const seconds = Math.max(1, Math.ceil(bytes.length / AUDIO_BYTES_PER_SECOND));
  const format = form.fields.response_format ?? 'json';
  if (form.fields.stream === 'true')
    throw bad('stream', 'stream: the sim engine does not stream transcriptions; leave stream out');
  const model = form.fields.model;
  switch (format) {
    case 'json':
      return {
        status: 200,
        contentType: JSON_TYPE,
        body: JSON.stringify({ text, usage: { type: 'duration', seconds } }),
        promptTokens: 0,
        model,
      };
    case 'text':
      return { status: 200, contentType: 'text/plain; charset=utf-8', body: text, promptTokens: 0, model };
    case 'verbose_json':
      return {
        status: 200,
        contentType: JSON_TYPE,
        body: JSON.stringify({
          task: 'transcribe',
          language: form.fields.language ?? 'en',
          duration: seconds,
          text,
          segments: [],
        }),
        promptTokens: 0,
        model,
      };
    default:
      throw bad(
        'response_format',
        `response_format: "${format.slice(0, 40)}" is not one the sim answers; want json, text or verbose_json`,
      );
  }
}
