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
  type ChatHistoryItem,
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
import { sequenceContextTokens, type CompiledBuiltinEngineOptions } from './options.js';
import { replyLogprobs, type TokenLogprob } from './logprobs.js';
import { forcedCall, forcedCallSchema, type ChatOutput, type JsonSchema, type ToolCall } from './tools.js';

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

export interface ChatResult extends GenerationResult {
  /** Calls the model made instead of (or after) text; empty when it only wrote text. */
  toolCalls: ToolCall[];
}

export interface EmbeddingResult {
  vectors: number[][];
  promptTokens: number;
}

/** Hands out the context's sequences, one per request; later requests wait in arrival order. */
class SequencePool {
  private readonly free: LlamaContextSequence[];
  private readonly waiters: { resolve: (s: LlamaContextSequence) => void; reject: (e: unknown) => void; signal: AbortSignal }[] = [];

  constructor(sequences: LlamaContextSequence[]) {
    this.free = sequences;
  }

  get waiting(): number {
    return this.waiters.length;
  }

  acquire(signal: AbortSignal): Promise<LlamaContextSequence> {
    signal.throwIfAborted();
    const ready = this.free.pop();
    if (ready) return Promise.resolve(ready);
    return new Promise((resolve, reject) => {
      const waiter = { resolve, reject, signal };
      this.waiters.push(waiter);
      signal.addEventListener(
        'abort',
        () => {
          const at = this.waiters.indexOf(waiter);
          if (at >= 0) this.waiters.splice(at, 1);
          reject(signal.reason);
        },
        { once: true },
      );
    });
  }

  release(sequence: LlamaContextSequence): void {
    const next = this.waiters.shift();
    if (next) next.resolve(sequence);
    else this.free.push(sequence);
  }
}

export class BuiltinRuntime {
  private embeddingContext: Promise<LlamaEmbeddingContext> | undefined;
  /** Embedding requests run one at a time on their own context; this chains them. */
  private embeddingQueue: Promise<unknown> = Promise.resolve();
  private inFlightCount = 0;

  private constructor(
    private readonly options: CompiledBuiltinEngineOptions,
    private readonly llama: Llama,
    readonly model: LlamaModel,
    private readonly pool: SequencePool,
    /** Tokens each sequence holds: prompt and reply together. */
    readonly sequenceContextTokens: number,
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
      const perSequence = sequenceContextTokens(options, facts.trainedContextTokens);
      const context = await model.createContext({
        sequences: options.parallel,
        contextSize: perSequence,
        threads: options.threads,
      });
      const sequences: LlamaContextSequence[] = [];
      for (let i = 0; i < options.parallel; i++) sequences.push(context.getSequence());
      return new BuiltinRuntime(options, llama, model, new SequencePool(sequences.reverse()), perSequence);
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

  /** Requests generating now, and requests waiting for a free sequence. */
  get load(): { inFlight: number; waiting: number } {
    return { inFlight: this.inFlightCount, waiting: this.pool.waiting };
  }

  /**
   * One chat answer. `output` decides its shape: free text, JSON under a
   * grammar, or tool calls (see ChatOutput). A schema that cannot become a
   * grammar is refused before a sequence is taken, so the client gets a 400
   * and not a broken stream.
   */
  async chat(
    turns: readonly ChatTurn[],
    params: SamplingParams,
    output: ChatOutput,
    onText: (text: string) => void,
    signal: AbortSignal,
  ): Promise<ChatResult> {
    const grammar = await this.grammarFor(output);
    const functions = output.kind === 'tools' || output.kind === 'forcedTool' ? chatFunctions(output.tools) : undefined;
    return this.withSequence(signal, async (sequence) => {
      const chat = new LlamaChat({ contextSequence: sequence, autoDisposeSequence: false });
      try {
        let history: ChatHistoryItem[] = turns.map((t): ChatHistoryItem => {
          if (t.role === 'system') return { type: 'system', text: t.content };
          if (t.role === 'user') return { type: 'user', text: t.content };
          const calls = (t.toolCalls ?? []).map((c) => ({ type: 'functionCall' as const, name: c.name, params: c.arguments, result: c.result ?? '' }));
          return { type: 'model', response: t.content === '' && calls.length > 0 ? calls : [t.content, ...calls] };
        });
        // A forced call is written by a grammar, not in the template's call
        // syntax; the template's own description of the functions tells the model what it is writing.
        if (output.kind === 'forcedTool') history = [...chat.chatWrapper.addAvailableFunctionsSystemMessageToHistory(history, functions, { documentParams: true })];
        // An empty model turn is the one the chat template leaves open for the reply.
        history.push({ type: 'model', response: [] });
        const { contextText } = chat.chatWrapper.generateContextState({
          chatHistory: history,
          ...(output.kind === 'tools' ? { availableFunctions: functions, documentFunctionParams: true } : {}),
        });
        const promptTokens = contextText.tokenize(this.model.tokenizer).length;
        const maxTokens = this.replyBudget(promptTokens, params.maxTokens);
        const { generated, options, logprobs } = this.streaming(sequence, params, maxTokens, signal, onText);
        const result =
          output.kind === 'tools'
            ? await chat.generateResponse(history, {
                ...options,
                functions,
                documentFunctionParams: true,
                ...(output.parallel ? {} : { maxParallelFunctionCalls: 1 }),
              })
            : await chat.generateResponse(history, { ...options, ...(grammar ? { grammar } : {}) });
        const reason = finishReason(result.metadata.stopReason, signal);
        const base = { promptTokens, completionTokens: generated(), ...(await logprobs(promptTokens)) };
        if (output.kind === 'forcedTool') {
          return { ...base, text: '', toolCalls: [forcedCall(output.tools, result.response)], finishReason: reason === 'stop' ? 'tool_calls' : reason };
        }
        const toolCalls = (result.functionCalls ?? []).map((call) => ({ name: call.functionName, arguments: JSON.stringify(call.params ?? {}) }));
        return { ...base, text: result.response, toolCalls, finishReason: toolCalls.length > 0 && reason === 'stop' ? 'tool_calls' : reason };
      } finally {
        chat.dispose({ disposeSequence: false });
      }
    });
  }

  /** The grammar an answer is written under; undefined for free text and for calls the template's syntax governs. */
  private async grammarFor(output: ChatOutput): Promise<LlamaGrammar | undefined> {
    if (output.kind === 'json' && output.schema === undefined) return this.llama.getGrammarFor('json');
    const [schema, param] =
      output.kind === 'json' ? [output.schema!, output.param] : output.kind === 'forcedTool' ? [forcedCallSchema(output.tools), 'tools'] : [];
    if (!schema) return undefined;
    try {
      return await this.llama.createGrammarForJsonSchema<GbnfJsonSchema>(schema as GbnfJsonSchema);
    } catch (err) {
      throw new LlmgwError(
        'LLMGW_BAD_REQUEST',
        `the JSON schema in ${param} cannot be turned into a grammar (${err instanceof Error ? err.message : String(err)}); ` +
          'use the types, properties, items, enum, const, oneOf and $defs/$ref that llama.cpp grammars support',
        { context: { param } },
      );
    }
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
  private streaming(sequence: LlamaContextSequence, params: SamplingParams, maxTokens: number, signal: AbortSignal, onText: (text: string) => void) {
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
        params.logprobs === undefined || signal.aborted ? {} : { logprobs: await replyLogprobs(this.model, sequence, promptTokens, released, params.logprobs) },
    };
  }

  async complete(prompt: string, params: SamplingParams, onText: (text: string) => void, signal: AbortSignal): Promise<GenerationResult> {
    // Tokenized here, as LlamaCompletion would, so that usage counts exactly what is evaluated.
    const bos = this.model.tokens.shouldPrependBosToken ? this.model.tokens.bos : null;
    const input: Token[] = this.model.tokenize(prompt, false, bos === null ? undefined : 'trimLeadingSpace');
    const promptTokens = input.length + (bos === null ? 0 : 1);
    const maxTokens = this.replyBudget(promptTokens, params.maxTokens);
    return this.withSequence(signal, async (sequence) => {
      const completion = new LlamaCompletion({ contextSequence: sequence, autoDisposeSequence: false });
      try {
        const { generated, options, logprobs } = this.streaming(sequence, params, maxTokens, signal, onText);
        const result = await completion.generateCompletionWithMeta(input, { ...options, disableContextShift: true });
        const completionTokens = generated();
        return { text: result.response, promptTokens, completionTokens, finishReason: finishReason(result.metadata.stopReason, signal), ...(await logprobs(promptTokens)) };
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
          throw new LlmgwError(
            'LLMGW_BAD_REQUEST',
            `input[${i}] is ${length} tokens but this engine embeds at most ${this.sequenceContextTokens}; split it or raise --ctx-size`,
            { context: { param: 'input' } },
          );
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

  private async withSequence<T>(signal: AbortSignal, work: (sequence: LlamaContextSequence) => Promise<T>): Promise<T> {
    const sequence = await this.pool.acquire(signal);
    this.inFlightCount++;
    try {
      return await work(sequence);
    } finally {
      this.inFlightCount--;
      this.pool.release(sequence);
    }
  }

  /** Tokens left for the reply: what was asked, capped by what the sequence has room for. */
  private replyBudget(promptTokens: number, requested: number | undefined): number {
    const room = this.sequenceContextTokens - promptTokens;
    if (room <= 0) {
      throw new LlmgwError(
        'LLMGW_BAD_REQUEST',
        `the prompt is ${promptTokens} tokens but each sequence of this engine holds ${this.sequenceContextTokens}; ` +
          'send a shorter prompt or start the engine with a larger --ctx-size',
        { context: { param: 'messages' } },
      );
    }
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

/** Tools as node-llama-cpp's function table; no handlers, since the client, not the engine, runs them. */
function chatFunctions(tools: readonly { name: string; description: string | undefined; parameters: JsonSchema }[]): ChatModelFunctions {
  return Object.fromEntries(
    tools.map((t) => [t.name, { ...(t.description === undefined ? {} : { description: t.description }), params: t.parameters as GbnfJsonSchema }]),
  );
}

function finishReason(stopReason: string, signal: AbortSignal): FinishReason {
  if (signal.aborted || stopReason === 'abort') return 'aborted';
  return stopReason === 'maxTokens' ? 'length' : 'stop';
}
