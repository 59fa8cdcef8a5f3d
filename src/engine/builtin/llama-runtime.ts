// The builtin engine's model, apart from HTTP: loads a GGUF through
// node-llama-cpp on the CPU (prebuilt binary only: never a download, never a
// compile), holds one context with a sequence per parallel request, and runs
// chat, raw completion and embedding requests on them with real token
// counts. The HTTP layer (server.ts) only translates OpenAI's shapes to these
// calls, so this file is where node-llama-cpp's API is known.
import { randomInt } from 'node:crypto';
import {
  getLlama,
  LlamaChat,
  LlamaCompletion,
  LlamaLogLevel,
  resolveChatWrapper,
  type ChatHistoryItem,
  type ChatWrapper,
  type ChatModelFunctions,
  type GbnfJsonSchema,
  type Llama,
  type LlamaGrammar,
  type LlamaContextSequence,
  type LlamaEmbeddingContext,
  type LlamaModel,
  type Token,
} from 'node-llama-cpp';
import { LlmgwError } from '../../errors/index.js';
import type { GgufModelFacts } from './gguf-check.js';
import { MIN_SEQUENCE_CONTEXT_TOKENS, sequenceLayout, type CompiledBuiltinEngineOptions } from './options.js';
import { SequenceKvEvents } from './kv-events.js';
import { replyLogprobs, type TokenLogprob } from './logprobs.js';
import { answerCheck, boundJsonGrammarNumbers, schemaGrammar } from './schema-grammar/index.js';
import {
  forcedCall,
  forcedCallSchema,
  type ChatOutput,
  type JsonSchema,
  type ToolCall,
  type ToolSpec,
} from './tools.js';

export interface ChatTurn {
  role: 'system' | 'user' | 'assistant';
  content: string;
  /** Calls an assistant turn made, each with the result a tool message gave; absent result means none came back. */
  toolCalls?: { name: string; arguments: unknown; result: string | undefined }[];
}

export interface SamplingParams {
  /** Most tokens to generate; absent means until the sequence's context is full. */
  maxTokens: number | undefined;
  /** 0 means greedy. */
  temperature: number;
  /** 1 means no nucleus cut. */
  topP: number;
  /** Absent means a fresh random seed per request. */
  seed: number | undefined;
  /** Strings that end generation; never part of the returned text. */
  stop: readonly string[];
  /** 0 and 0 mean no repetition penalty at all (OpenAI's default, unlike llama.cpp's). */
  frequencyPenalty: number;
  presencePenalty: number;
  /** Alternatives to report per token; absent means no logprobs at all, 0 the chosen token's alone. */
  logprobs?: number | undefined;
}

export type FinishReason = 'stop' | 'length' | 'tool_calls' | 'aborted';

export interface GenerationResult {
  text: string;
  promptTokens: number;
  completionTokens: number;
  finishReason: FinishReason;
  /** One entry per token of `text`; absent unless SamplingParams.logprobs asked for it. */
  logprobs?: TokenLogprob[];
}

/** What an answer is checked against after it is written: null when it meets the schema, else why not. */
export type ResultCheck = (result: {
  response: string;
  functionCalls?: readonly { functionName: string; params: unknown }[];
}) => string | null;

/** How a structured answer is written: its grammar, and the check of what the grammar does not hold. */
export interface AnswerPlan {
  /** Absent: the template's own call syntax governs (tool_choice auto). */
  grammar?: LlamaGrammar;
  /** Null: every answer the grammar writes validates, so none is held back or checked. */
  check: ResultCheck | null;
  /** The error when a second try breaks the schema too, given the check's reason. */
  invalid: (broken: string) => string;
  /** The request field the schema came from. */
  param: string;
}

export interface ChatResult extends GenerationResult {
  /** Calls the model made instead of (or after) text; empty when it only wrote text. */
  toolCalls: ToolCall[];
}

export interface EmbeddingResult {
  vectors: number[][];
  promptTokens: number;
}

/** Seconds a refused request is told to wait: about one short reply on a CPU engine. */
export const BUSY_RETRY_AFTER_SECONDS = 1;

/**
 * Hands out the context's sequences, one per request; later requests wait in
 * arrival order, at most `maxQueue` of them. Past that a request is refused
 * at once (429 with Retry-After) rather than left to wait without bound, so
 * a client or the router can go elsewhere or back off. A waiter whose client
 * goes away leaves the queue at once.
 *
 * A free sequence keeps the tokens of its last request, and llama.cpp reuses
 * whatever prefix a new prompt shares with them instead of evaluating it
 * again. So a request takes the free sequence holding the longest prefix of
 * its prompt when that covers at least half of it (a conversation's next
 * turn finds its own history; llama-server's slot similarity uses the same
 * half); otherwise the one used least recently, which keeps the others'
 * histories longest. A waiter takes whichever sequence frees first: arrival
 * order beats reuse.
 */
export class SequencePool<S = LlamaContextSequence> {
  /** Least recently used first. */
  private readonly free: S[];
  private readonly busy = new Set<S>();
  private readonly waiters: { resolve: (s: S) => void; reject: (e: unknown) => void; signal: AbortSignal }[] = [];

  constructor(
    sequences: S[],
    private readonly maxQueue: number,
    /** The tokens a sequence holds now; absent = none known, so every choice is by release order. */
    private readonly held: (sequence: S) => readonly number[] = () => [],
  ) {
    this.free = [...sequences];
  }

  get waiting(): number {
    return this.waiters.length;
  }

  /** The sequences serving a request now. */
  get inUse(): ReadonlySet<S> {
    return this.busy;
  }

  /** `prompt`: the tokens the request will evaluate first; absent = no preference. */
  acquire(signal: AbortSignal, prompt?: readonly number[]): Promise<S> {
    if (signal.aborted) return Promise.reject(signal.reason as Error);
    const ready = this.takeFree(prompt);
    if (ready !== undefined) {
      this.busy.add(ready);
      return Promise.resolve(ready);
    }
    if (this.waiters.length >= this.maxQueue) {
      const size = this.busy.size;
      return Promise.reject(
        new LlmgwError(
          'LLMGW_ENGINE_BUSY',
          `all ${size} sequence(s) of this engine are generating and ${this.waiters.length} request(s) already wait (--max-queue ${this.maxQueue}); ` +
            `retry after ${BUSY_RETRY_AFTER_SECONDS} s, or start the engine with more --parallel sequences or a longer --max-queue`,
          { context: { retryAfterSeconds: BUSY_RETRY_AFTER_SECONDS } },
        ),
      );
    }
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        const at = this.waiters.indexOf(waiter);
        if (at >= 0) this.waiters.splice(at, 1);
        reject(signal.reason);
      };
      const waiter = {
        resolve: (s: S) => {
          signal.removeEventListener('abort', onAbort);
          resolve(s);
        },
        reject,
        signal,
      };
      this.waiters.push(waiter);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Hands the sequence straight to the longest waiter, or back to the free list. */
  release(sequence: S): void {
    const next = this.waiters.shift();
    if (next) {
      next.resolve(sequence);
      return;
    }
    this.busy.delete(sequence);
    this.free.push(sequence);
  }

  private takeFree(prompt: readonly number[] | undefined): S | undefined {
    if (this.free.length === 0) return undefined;
    let best = 0;
    if (prompt !== undefined && prompt.length > 0) {
      let bestShared = 0;
      for (const [i, sequence] of this.free.entries()) {
        const shared = sharedPrefix(this.held(sequence), prompt);
        if (shared > bestShared) {
          bestShared = shared;
          best = i;
        }
      }
      if (bestShared * 2 < prompt.length) best = 0;
    }
    return this.free.splice(best, 1)[0];
  }
}

function sharedPrefix(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

export class BuiltinRuntime {
  private embeddingContext: Promise<LlamaEmbeddingContext> | undefined;
  /** Embedding requests run one at a time on their own context; this chains them. */
  private embeddingQueue: Promise<unknown> = Promise.resolve();
  private inFlightCount = 0;
  /**
   * What the sequences hold, published on GET /kv-events. Each sequence is
   * numbered the first time it serves (its number names its blocks).
   */
  readonly kvEvents = new SequenceKvEvents();
  private readonly sequenceNumbers = new Map<LlamaContextSequence, number>();

  private constructor(
    private readonly options: CompiledBuiltinEngineOptions,
    private readonly llama: Llama,
    readonly model: LlamaModel,
    private readonly pool: SequencePool,
    /** Sequences in the context: requests generated at once. */
    readonly parallel: number,
    /** Tokens each sequence holds: prompt and reply together. */
    readonly sequenceContextTokens: number,
    /**
     * The model's chat template, resolved once at load as LlamaChat's
     * "auto" would: resolved per LlamaChat, a Jinja template renders sample
     * histories each time, about 0.4 s a request on the tiny model (longer
     * than its reply) and a cost no parallelism hides.
     */
    private readonly chatWrapper: ChatWrapper,
  ) {}

  /** Loads the model and creates its context. Throws LLMGW_ENGINE_START_FAILED with llama.cpp's reason. */
  static async load(options: CompiledBuiltinEngineOptions, facts: GgufModelFacts): Promise<BuiltinRuntime> {
    let llama: Llama;
    try {
      llama = await getLlama({
        gpu: false,
        // Use the prebuilt @node-llama-cpp/linux-x64 binary or fail: an engine
        // must never fetch llama.cpp's source or spend minutes compiling it.
        build: 'never',
        usePrebuiltBinaries: true,
        skipDownload: true,
        progressLogs: false,
        maxThreads: options.threads,
        logLevel: LlamaLogLevel.warn,
        logger: (level, message) => {
          const line = message.trim();
          if (line) options.log(`llama.cpp ${level}: ${line}`);
        },
      });
    } catch (err) {
      throw new LlmgwError(
        'LLMGW_ENGINE_START_FAILED',
        `the builtin engine found no usable llama.cpp binary (${err instanceof Error ? err.message : String(err)}); ` +
          'reinstall llmgw so that @node-llama-cpp/linux-x64 is present',
        { cause: err },
      );
    }
    try {
      const model = await llama.loadModel({ modelPath: options.modelPath, gpuLayers: 0 });
      const layout = sequenceLayout(options, facts.trainedContextTokens);
      // One context, `parallel` sequences: node-llama-cpp decodes the tokens
      // of every busy sequence in one batch, which is the whole point of
      // parallel decoding. contextSize is per sequence in node-llama-cpp.
      const context = await model.createContext({
        sequences: layout.parallel,
        contextSize: layout.perSequence,
        threads: options.threads,
      });
      const sequences: LlamaContextSequence[] = [];
      for (let i = 0; i < layout.parallel; i++) sequences.push(context.getSequence());
      return new BuiltinRuntime(
        options,
        llama,
        model,
        new SequencePool(sequences, layout.maxQueue, (sequence) => sequence.contextTokens),
        layout.parallel,
        layout.perSequence,
        resolveChatWrapper(model),
      );
    } catch (err) {
      await llama.dispose().catch(() => undefined);
      throw new LlmgwError(
        'LLMGW_ENGINE_START_FAILED',
        `llama.cpp could not load ${options.modelPath}: ${err instanceof Error ? err.message : String(err)}`,
        { cause: err, context: { modelPath: options.modelPath } },
      );
    }
  }

  /** Which llama.cpp build serves, for the log: "prebuilt" from @node-llama-cpp/linux-x64, or "localBuild". */
  get binary(): string {
    return `${this.llama.buildType} llama.cpp ${this.llama.llamaCppRelease.release}, ${this.llama.gpu === false ? 'CPU' : this.llama.gpu}`;
  }

  /**
   * Requests generating now, requests waiting for a free sequence, and the
   * share of the KV cache that generating requests hold (0 to 1): their
   * sequences' tokens over every sequence's room. A free sequence keeps its
   * tokens for prefix reuse, but they are given up on its next request, so
   * like vLLM's kv_cache_usage_perc they count as free.
   */
  get load(): { inFlight: number; waiting: number; kvCacheUsage: number } {
    let held = 0;
    for (const sequence of this.pool.inUse) held += sequence.nextTokenIndex;
    return {
      inFlight: this.inFlightCount,
      waiting: this.pool.waiting,
      kvCacheUsage: held / (this.parallel * this.sequenceContextTokens),
    };
  }

  /**
   * One chat answer. `output` decides its shape: free text, JSON under a
   * grammar, or tool calls (see ChatOutput). A schema that cannot become a
   * grammar is refused before a sequence is taken, so the client gets a 400
   * and not a broken stream. Where the grammar only approximates the schema
   * (see schema-grammar), the answer is held back, checked, and written once
   * more if it breaks the schema; its text reaches `onText` only once it
   * validates, and usage counts the tokens of both tries.
   */
  async chat(
    turns: readonly ChatTurn[],
    params: SamplingParams,
    output: ChatOutput,
    onText: (text: string) => void,
    signal: AbortSignal,
  ): Promise<ChatResult> {
    const plan = await this.grammarFor(output);
    const functions = output.kind === 'tools' || output.kind === 'forcedTool' ? chatFunctions(output.tools) : undefined;
    const { history, tokens } = this.chatPrompt(turns, output, functions);
    const promptTokens = tokens.length;
    const maxTokens = this.replyBudget(promptTokens, params.maxTokens, 'messages');
    return this.withSequence(signal, tokens, async (sequence) => {
      const chat = new LlamaChat({
        contextSequence: sequence,
        autoDisposeSequence: false,
        chatWrapper: this.chatWrapper,
      });
      try {
        const check = plan?.check ?? null;
        // A grammar-written answer that must be checked is held back until it is; text the model writes beside
        // calls of its own choosing (tool_choice auto) streams as it comes, and is then never written twice.
        const hold = check !== null && output.kind !== 'tools';
        let emitted = false;
        const emit = hold
          ? () => {}
          : (text: string) => {
              emitted = true;
              onText(text);
            };
        const attempt = async (seedShift: number) => {
          const { generated, options, logprobs } = this.streaming(sequence, params, maxTokens, signal, emit);
          const sampled = { ...options, seed: (options.seed + seedShift) % 2 ** 32 };
          const result =
            output.kind === 'tools'
              ? await chat.generateResponse(history, {
                  ...sampled,
                  functions,
                  documentFunctionParams: true,
                  ...(output.parallel ? {} : { maxParallelFunctionCalls: 1 }),
                })
              : await chat.generateResponse(history, {
                  ...sampled,
                  ...(plan?.grammar ? { grammar: plan.grammar } : {}),
                });
          return { result, reason: finishReason(result.metadata.stopReason, signal), generated: generated(), logprobs };
        };
        let tried = await attempt(0);
        let spent = tried.generated;
        const brokenBy = (t: typeof tried) => (check && t.reason === 'stop' ? check(t.result) : null);
        let broken = brokenBy(tried);
        if (broken !== null && !emitted) {
          tried = await attempt(1);
          spent += tried.generated;
          broken = brokenBy(tried);
        }
        if (broken !== null)
          throw new LlmgwError('LLMGW_ANSWER_INVALID', plan!.invalid(broken), { context: { param: plan!.param } });
        if (hold && tried.result.response !== '') onText(tried.result.response);
        const { result, reason } = tried;
        const base = { promptTokens, completionTokens: spent, ...(await tried.logprobs(promptTokens)) };
        if (output.kind === 'forcedTool') {
          return {
            ...base,
            text: '',
            toolCalls: [forcedCall(output.tools, result.response)],
            finishReason: reason === 'stop' ? 'tool_calls' : reason,
          };
        }
        const toolCalls = (result.functionCalls ?? []).map((call) => ({
          name: call.functionName,
          arguments: JSON.stringify(call.params ?? {}),
        }));
        return {
          ...base,
          text: result.response,
          toolCalls,
          finishReason: toolCalls.length > 0 && reason === 'stop' ? 'tool_calls' : reason,
        };
      } finally {
        chat.dispose({ disposeSequence: false });
      }
    });
  }

  /**
   * The grammar an answer is written under, with the check of what it only
   * approximates (null = every answer it writes validates); undefined for
   * free text and for calls the template's syntax governs.
   */
  private async grammarFor(output: ChatOutput): Promise<AnswerPlan | undefined> {
    if (output.kind === 'text') return undefined;
    if (output.kind === 'tools') return callsPlan(output.tools);
    if (output.kind === 'json' && output.schema === undefined) {
      const grammar = await this.rewritten(await this.llama.getGrammarFor('json'), boundJsonGrammarNumbers);
      return { grammar, check: null, invalid: String, param: output.param };
    }
    const [schema, param]: [JsonSchema, string] =
      output.kind === 'json'
        ? [output.schema!, output.param]
        : [forcedCallSchema(output.tools), output.tools.length === 1 ? output.tools[0]!.param : 'tools'];
    // Both throw the client's 400 for a schema no answer could meet; the grammar names where.
    const { gbnf, loose } = schemaGrammar(schema, param);
    const answer = loose.length > 0 ? answerCheck(schema, param) : null;
    const grammar = await this.llama.createGrammar({ grammar: gbnf });
    return {
      grammar,
      check: answer && ((result) => answer(result.response)),
      invalid: (broken) =>
        `the model wrote two answers that break the schema in ${param} (${broken}); ` +
        `its grammar cannot enforce ${loose.join(', ')}, so answers are checked: ` +
        'ask again, or leave those keywords out and check them yourself',
      param,
    };
  }

  /**
   * `grammar` with its text rewritten, through node-llama-cpp's own
   * createGrammar (its grammar builders take no rule of ours). Outside the
   * client's 400 above: a rewrite that breaks the grammar is llmgw's bug.
   */
  private rewritten(grammar: LlamaGrammar, rewrite: (gbnf: string) => string): Promise<LlamaGrammar> {
    return this.llama.createGrammar({
      grammar: rewrite(grammar.grammar),
      rootRuleName: grammar.rootRuleName,
      stopGenerationTriggers: grammar.stopGenerationTriggers,
      trimWhitespaceSuffix: grammar.trimWhitespaceSuffix,
    });
  }

  /**
   * What chat and completion both hand node-llama-cpp: sampling, the budget,
   * the client's abort and text as it streams; and how many tokens the
   * sequence sampled for this request. Usage reports what was generated, as
   * llama.cpp's server does, not a re-tokenisation and not what `onToken`
   * saw: node-llama-cpp holds back a token that ends inside a UTF-8
   * character (or may start a stop string) and never releases it when the
   * budget runs out there, which once made a reply stopped at 7 tokens
   * report 6.
   */
  private streaming(
    sequence: LlamaContextSequence,
    params: SamplingParams,
    maxTokens: number,
    signal: AbortSignal,
    onText: (text: string) => void,
  ) {
    const before = sequence.tokenMeter.getState();
    const options = {
      ...this.sampling(params),
      maxTokens,
      signal,
      stopOnAbortSignal: true,
      onTextChunk: (text: string) => {
        if (text !== '') onText(text);
      },
      // The tokens behind the text, as released with it: what logprobs are reported for.
      ...(params.logprobs === undefined ? {} : { onToken: (tokens: Token[]) => released.push(...tokens) }),
    };
    const released: Token[] = [];
    return {
      // Each sampled token is one evaluation with logits: the meter's "output" tokens. Read it before logprobs re-evaluates the reply.
      generated: () => sequence.tokenMeter.diff(before).usedOutputTokens,
      options,
      logprobs: async (promptTokens: number): Promise<{ logprobs?: TokenLogprob[] }> =>
        params.logprobs === undefined || signal.aborted
          ? {}
          : { logprobs: await replyLogprobs(this.model, sequence, promptTokens, released, params.logprobs) },
    };
  }

  /**
   * The chat prompt as chat() evaluates it: the history, with the open turn
   * the template leaves for the reply, and its tokens. No sequence is
   * needed, so /tokenize counts a conversation exactly as its usage will.
   */
  private chatPrompt(
    turns: readonly ChatTurn[],
    output: ChatOutput,
    functions: ReturnType<typeof chatFunctions> | undefined,
  ): { history: ChatHistoryItem[]; tokens: Token[] } {
    let history: ChatHistoryItem[] = turns.map((t): ChatHistoryItem => {
      if (t.role === 'system') return { type: 'system', text: t.content };
      if (t.role === 'user') return { type: 'user', text: t.content };
      const calls = (t.toolCalls ?? []).map((c) => ({
        type: 'functionCall' as const,
        name: c.name,
        params: c.arguments,
        result: c.result ?? '',
      }));
      return { type: 'model', response: t.content === '' && calls.length > 0 ? calls : [t.content, ...calls] };
    });
    // A forced call is written by a grammar, not in the template's call
    // syntax; the template's own description of the functions tells the model what it is writing.
    if (output.kind === 'forcedTool')
      history = [
        ...this.chatWrapper.addAvailableFunctionsSystemMessageToHistory(history, functions, { documentParams: true }),
      ];
    // An empty model turn is the one the chat template leaves open for the reply.
    history.push({ type: 'model', response: [] });
    const { contextText } = this.chatWrapper.generateContextState({
      chatHistory: history,
      ...(output.kind === 'tools' ? { availableFunctions: functions, documentFunctionParams: true } : {}),
    });
    return { history, tokens: contextText.tokenize(this.model.tokenizer) };
  }

  /** A conversation's prompt tokens under the model's chat template (vLLM's /tokenize with messages): what chat() reports as prompt_tokens. */
  chatTokens(turns: readonly ChatTurn[], output: ChatOutput): number[] {
    const functions = output.kind === 'tools' || output.kind === 'forcedTool' ? chatFunctions(output.tools) : undefined;
    return this.chatPrompt(turns, output, functions).tokens;
  }

  /** Text as complete() tokenizes a prompt; with `addSpecial`, the BOS token first where the model wants one (vLLM's add_special_tokens). */
  textTokens(text: string, addSpecial: boolean): number[] {
    const bos = addSpecial && this.model.tokens.shouldPrependBosToken ? this.model.tokens.bos : null;
    const input = this.model.tokenize(text, false, bos === null ? undefined : 'trimLeadingSpace');
    return bos === null ? [...input] : [bos, ...input];
  }

  /** Token ids back to text (checked against the vocabulary by the caller: llama.cpp does not check them). */
  detokenize(tokens: readonly number[]): string {
    return this.model.detokenize(tokens as Token[], false);
  }

  async complete(
    prompt: string,
    params: SamplingParams,
    onText: (text: string) => void,
    signal: AbortSignal,
  ): Promise<GenerationResult> {
    // Tokenized here, as LlamaCompletion would, so that usage counts exactly what is evaluated.
    const bos = this.model.tokens.shouldPrependBosToken ? this.model.tokens.bos : null;
    const input: Token[] = this.model.tokenize(prompt, false, bos === null ? undefined : 'trimLeadingSpace');
    const promptTokens = input.length + (bos === null ? 0 : 1);
    const maxTokens = this.replyBudget(promptTokens, params.maxTokens, 'prompt');
    return this.withSequence(signal, bos === null ? input : [bos, ...input], async (sequence) => {
      const completion = new LlamaCompletion({ contextSequence: sequence, autoDisposeSequence: false });
      try {
        const { generated, options, logprobs } = this.streaming(sequence, params, maxTokens, signal, onText);
        const result = await completion.generateCompletionWithMeta(input, { ...options, disableContextShift: true });
        const completionTokens = generated();
        return {
          text: result.response,
          promptTokens,
          completionTokens,
          finishReason: finishReason(result.metadata.stopReason, signal),
          ...(await logprobs(promptTokens)),
        };
      } finally {
        completion.dispose({ disposeSequence: false });
      }
    });
  }

  async embed(inputs: readonly string[], signal: AbortSignal): Promise<EmbeddingResult> {
    const run = this.embeddingQueue.then(async () => {
      signal.throwIfAborted();
      this.embeddingContext ??= this.model.createEmbeddingContext({
        contextSize: this.sequenceContextTokens,
        threads: this.options.threads,
      });
      const context = await this.embeddingContext;
      const vectors: number[][] = [];
      let promptTokens = 0;
      for (const [i, input] of inputs.entries()) {
        signal.throwIfAborted();
        const length = context.calculateInputLength(input);
        if (length > this.sequenceContextTokens) {
          throw contextLengthExceeded(this.sequenceContextTokens, length, 'input', this.parallel, `input[${i}]`);
        }
        promptTokens += length;
        vectors.push([...(await context.getEmbeddingFor(input)).vector]);
      }
      return { vectors, promptTokens };
    });
    // A failed request must not poison the queue for the next one.
    this.embeddingQueue = run.catch(() => undefined);
    return run;
  }

  async dispose(): Promise<void> {
    // Disposing the Llama disposes its models, contexts and sequences with it.
    await this.llama.dispose();
  }

  /**
   * Runs `work` on a sequence of the pool: waiting for one (or refused with
   * LLMGW_ENGINE_BUSY past --max-queue), counted as in flight while it
   * runs, and handed on the moment `work` settles. Of the free sequences it
   * takes the one that already holds the longest prefix of `prompt` (empty =
   * no preference), so that prefix is not evaluated again. Public so that
   * tests can hold sequences busy and watch requests queue without racing a
   * model.
   */
  async withSequence<T>(
    signal: AbortSignal,
    prompt: readonly number[],
    work: (sequence: LlamaContextSequence) => Promise<T>,
  ): Promise<T> {
    const sequence = await this.pool.acquire(signal, prompt);
    this.inFlightCount++;
    try {
      return await work(sequence);
    } finally {
      this.inFlightCount--;
      this.pool.release(sequence);
      // What the request left in the sequence stays cached for the next one. A waiter handed the sequence
      // runs only after this synchronous code, so the tokens read here are still the ones it left.
      if (!sequence.disposed) {
        let n = this.sequenceNumbers.get(sequence);
        if (n === undefined) this.sequenceNumbers.set(sequence, (n = this.sequenceNumbers.size));
        this.kvEvents.update(n, sequence.contextTokens);
      }
    }
  }

  /**
   * Tokens left for the reply: what was asked, capped by what the sequence
   * has room for (as llama-server does). A prompt that leaves no room is
   * OpenAI's context_length_exceeded, in OpenAI's words (clients that trim
   * history match them), then what to change on this engine.
   */
  private replyBudget(promptTokens: number, requested: number | undefined, param: 'messages' | 'prompt'): number {
    const room = this.sequenceContextTokens - promptTokens;
    if (room <= 0) throw contextLengthExceeded(this.sequenceContextTokens, promptTokens, param, this.parallel);
    return requested === undefined ? room : Math.min(requested, room);
  }

  private sampling(params: SamplingParams) {
    const penalised = params.frequencyPenalty !== 0 || params.presencePenalty !== 0;
    return {
      temperature: params.temperature,
      topP: params.topP,
      // Absent, node-llama-cpp seeds with the current second, so the same
      // prompt within one second would get the same reply; OpenAI varies it.
      seed: params.seed ?? randomInt(2 ** 32),
      customStopTriggers: params.stop,
      trimWhitespaceSuffix: false,
      repeatPenalty: penalised
        ? { penalty: 1, frequencyPenalty: params.frequencyPenalty, presencePenalty: params.presencePenalty }
        : (false as const),
    };
  }
}

/**
 * Calls the model makes of its own choosing (tool_choice auto) are written
 * in its template's syntax under node-llama-cpp's grammar, which holds only
 * part of a schema (no ranges, patterns or most formats, and numbers it does
 * not bound), so each call's arguments are checked against its tool's whole
 * schema; a broken call is written again once, if no text went out first.
 */
export function callsPlan(tools: readonly ToolSpec[]): AnswerPlan {
  const checks = new Map(tools.map((t) => [t.name, { param: t.param, check: answerCheck(t.parameters, t.param) }]));
  return {
    check: (result) => {
      for (const call of result.functionCalls ?? []) {
        const tool = checks.get(call.functionName);
        const broken = tool?.check(JSON.stringify(call.params ?? {}));
        if (tool && broken) return `${call.functionName}'s arguments break ${tool.param}: ${broken}`;
      }
      return null;
    },
    invalid: (broken) =>
      `the model called a tool with arguments that break its schema (${broken}), and could not be asked again ` +
      'or broke it again: ask again, or force the call (tool_choice "required" or a named function), whose arguments a grammar writes',
    param: 'tools',
  };
}

/** Tools as node-llama-cpp's function table; no handlers, since the client, not the engine, runs them. */
function chatFunctions(
  tools: readonly { name: string; description: string | undefined; parameters: JsonSchema }[],
): ChatModelFunctions {
  return Object.fromEntries(
    tools.map((t) => [
      t.name,
      {
        ...(t.description === undefined ? {} : { description: t.description }),
        params: t.parameters as GbnfJsonSchema,
      },
    ]),
  );
}

function finishReason(stopReason: string, signal: AbortSignal): FinishReason {
  if (signal.aborted || stopReason === 'abort') return 'aborted';
  return stopReason === 'maxTokens' ? 'length' : 'stop';
}

/**
 * OpenAI's context_length_exceeded, worded as OpenAI words it for chat
 * (`messages`) and for completions and embeddings, then the engine's remedy.
 * The limit is one sequence's: --ctx-size is shared by --parallel sequences.
 * The engine cannot tell who started it, so the remedy names both its own
 * flags and where llmgw's agent takes them from (the profile's `args`).
 */
export function contextLengthExceeded(
  limit: number,
  tokens: number,
  param: 'messages' | 'prompt' | 'input',
  parallel: number,
  what?: string,
): LlmgwError {
  const openAi =
    param === 'messages'
      ? `This model's maximum context length is ${limit} tokens. However, your messages resulted in ${tokens} tokens. Please reduce the length of the messages.`
      : `This model's maximum context length is ${limit} tokens, however you requested ${tokens} tokens (${tokens} in your prompt; 0 for the completion). ` +
        'Please reduce your prompt; or completion length.';
  // Room for a reply as long again, in a round number; --ctx-size is every sequence's together.
  const suggested = parallel * 2 ** Math.ceil(Math.log2(Math.max(2 * tokens, MIN_SEQUENCE_CONTEXT_TOKENS)));
  const remedy =
    ` (${what ?? 'the prompt'} is ${tokens} tokens; each of this engine's ${parallel} sequence(s) holds ${limit}: ` +
    "start it with a larger --ctx-size or fewer --parallel sequences; under llmgw they go in the model's catalog " +
    `profile, e.g. args: [--ctx-size, '${suggested}'])`;
  return new LlmgwError('LLMGW_CONTEXT_LENGTH_EXCEEDED', openAi + remedy, { context: { param } });
}
