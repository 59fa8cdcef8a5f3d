// The prompt's token ids, as the model's own tokenizer makes them, for the
// index's lookup: the engine's POST /tokenize (vLLM, sim and builtin take
// chat messages and apply the template; llama.cpp takes text, so its
// /apply-template goes first). The index keys blocks by token ids, so the
// gateway must cut a prompt the way the engine did; without a tokenizer the
// chooser falls back to the text-prefix hash. Separate from the index (pure)
// and the chooser (synchronous) because this is the one await on the way
// to a choice: the attempt loop runs it before choosing.
//
// What a prompt tokenises to is cached per prompt prefix: by a hash chained
// over the model and its messages, one key per leading run of messages,
// keeping only the chain hashes the lookup needs (a few bytes per block,
// not the tokens). A choice never waits for the engine: it looks up the
// longest run of leading messages already tokenised (the conversation's
// previous turn, or its system prompt), whose full blocks are a prefix of
// this prompt's, while this prompt is tokenised in the background for the
// next turn. A block that differs (a template's closing tokens) only ends
// the match early: what the lookup counts is a lower bound.
import { hash } from 'node:crypto';
import { promptChain } from './chain-hash.js';

/** The engines whose /tokenize the gateway knows how to ask; the rest have none here. */
const TOKENIZING_ENGINES = new Set(['vllm', 'sim', 'builtin', 'llamacpp']);

/** Whether a replica's engine can tokenise a prompt for the lookup; absent engine = unknown, not asked. */
export function canTokenize(engine: string | undefined): boolean {
  return engine !== undefined && TOKENIZING_ENGINES.has(engine);
}

/** A prompt cut into blocks for one block size: each block's chain hash and the last block's length. */
export interface PromptBlocks {
  readonly hashes: Float64Array;
  /** Tokens in the last block (blockSize unless the prompt ends mid-block); 0 for an empty prompt. */
  readonly tail: number;
}

/** A tokenised prompt, as the cache keeps it. */
export interface PromptTokens {
  readonly count: number;
  /** By block size: the sizes the model's replicas had when it was tokenised. */
  readonly blocks: ReadonlyMap<number, PromptBlocks>;
}

/** What the tokenizer is asked with: the replica to ask and how. */
export interface TokenizeTarget {
  readonly endpoint: string;
  readonly engine: string;
  /** The model name the engine answers to. */
  readonly servedName: string;
  readonly engineSecret?: string;
}

export interface PromptTokenizerOptions {
  /** Longest wait for an engine's answer, ms; past it the request is routed without the index. */
  readonly timeoutMs: number;
  /** Prompts kept tokenised, least recently used dropped first. */
  readonly entries: number;
  readonly fetch?: typeof globalThis.fetch;
}

/** A chat prompt (its messages) or a completions prompt (text). */
export type Prompt = { readonly messages: readonly unknown[] } | { readonly prompt: string };

/** The prompt of a chat or completions body; null = neither (nothing to look up). */
export function promptOf(body: Record<string, unknown>): Prompt | null {
  if (Array.isArray(body.messages) && body.messages.length > 0) return { messages: body.messages };
  if (typeof body.prompt === 'string') return { prompt: body.prompt };
  return null;
}

export class PromptTokenizer {
  private readonly cache = new Map<string, PromptTokens>();
  private readonly fetchFn: typeof globalThis.fetch;

  constructor(private readonly options: PromptTokenizerOptions) {
    this.fetchFn = options.fetch ?? globalThis.fetch;
  }

  /**
   * The cache keys of a model's prompt, one per leading run of messages
   * (keys[k] is messages 0..k), or one for a completions prompt.
   */
  keysOf(model: string, prompt: Prompt): string[] {
    if ('prompt' in prompt) return [hash('sha1', `${model}\nprompt\n${prompt.prompt}`, 'base64')];
    const keys: string[] = [];
    let key = hash('sha1', `${model}\nmessages`, 'base64');
    for (const m of prompt.messages) {
      key = hash('sha1', `${key}\n${JSON.stringify(m)}`, 'base64');
      keys.push(key);
    }
    return keys;
  }

  /** A prompt already tokenised with every one of `blockSizes`; undefined = not (yet). */
  cached(key: string, blockSizes: readonly number[]): PromptTokens | undefined {
    const hit = this.cache.get(key);
    if (!hit || !blockSizes.every((b) => hit.blocks.has(b))) return undefined;
    this.cache.delete(key);
    this.cache.set(key, hit);
    return hit;
  }

  /** The longest run of leading messages (the last key first) already tokenised; undefined = none is. */
  longest(keys: readonly string[], blockSizes: readonly number[]): { at: number; tokens: PromptTokens } | undefined {
    for (let k = keys.length - 1; k >= 0; k--) {
      const tokens = this.cached(keys[k]!, blockSizes);
      if (tokens) return { at: k, tokens };
    }
    return undefined;
  }

  /**
   * Tokenises the prompt on `target` and keeps its blocks for each of
   * `blockSizes`. Throws when the engine fails, answers nothing usable, or
   * takes longer than timeoutMs; the caller routes without the index then.
   */
  async tokenize(
    key: string,
    prompt: Prompt,
    target: TokenizeTarget,
    blockSizes: readonly number[],
  ): Promise<PromptTokens> {
    const tokens = await this.ask(prompt, target);
    const blocks = new Map<number, PromptBlocks>();
    for (const size of blockSizes) {
      const { hashes, lengths } = promptChain(tokens, size);
      blocks.set(size, { hashes: Float64Array.from(hashes), tail: lengths.at(-1) ?? 0 });
    }
    const entry: PromptTokens = { count: tokens.length, blocks };
    this.cache.delete(key);
    this.cache.set(key, entry);
    while (this.cache.size > Math.max(1, this.options.entries)) this.cache.delete(this.cache.keys().next().value!);
    return entry;
  }

  private async ask(prompt: Prompt, target: TokenizeTarget): Promise<number[]> {
    const signal = AbortSignal.timeout(this.options.timeoutMs);
    const post = async (path: string, body: unknown): Promise<Record<string, unknown>> => {
      const res = await this.fetchFn(
        new URL(path, target.endpoint.endsWith('/') ? target.endpoint : `${target.endpoint}/`),
        {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            ...(target.engineSecret ? { authorization: `Bearer ${target.engineSecret}` } : {}),
          },
          body: JSON.stringify(body),
          signal,
        },
      );
      if (!res.ok) throw new Error(`POST /${path} answered ${res.status}`);
      return (await res.json()) as Record<string, unknown>;
    };
    let answer: Record<string, unknown>;
    if (target.engine === 'llamacpp') {
      // llama-server's /tokenize takes text only: the template first, then the text as the slot would hold it.
      let text: string;
      if ('messages' in prompt) {
        const templated = await post('apply-template', { messages: prompt.messages });
        if (typeof templated.prompt !== 'string') throw new Error('POST /apply-template answered no prompt');
        text = templated.prompt;
      } else text = prompt.prompt;
      answer = await post('tokenize', { content: text, add_special: false, parse_special: true });
    } else {
      answer = await post('tokenize', { model: target.servedName, ...prompt });
    }
    const tokens = answer.tokens;
    if (!Array.isArray(tokens) || !tokens.every((t) => typeof t === 'number'))
      throw new Error('POST /tokenize answered no list of token ids');
    return tokens as number[];
  }
}
