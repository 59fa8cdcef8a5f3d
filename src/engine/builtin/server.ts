// The builtin engine's HTTP listener: OpenAI's routes over BuiltinRuntime,
// on node:http because streaming is a loop of res.write() and nothing more.
// It listens before the model loads, so /health can say "loading" (as
// llama-server does) while the agent waits; it stops generating the moment a
// client goes away, and counts those aborts for /health and the logs.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { isLlmgwError, LlmgwError } from '../../errors/index.js';
import { openFileLimit } from '../../http/index.js';
import { readServerTls } from '../../tls/index.js';
import { API_KEY_REFUSAL, apiKeyGuards, bearerMatches } from '../api-key.js';
import { chatChoice, ChoiceDeltas, openingDelta } from './chat-answer.js';
import { choiceSeed, runChoices } from './choices.js';
import { readGgufModelFacts, type GgufModelFacts } from './gguf-check.js';
import { BuiltinRuntime, type GenerationResult } from './llama-runtime.js';
import {
  base64Embedding,
  ChatCompletionRequestSchema,
  chatLogprobs,
  chatTurns,
  completionLogprobs,
  completionPrompt,
  CompletionRequestSchema,
  DetokenizeRequestSchema,
  EmbeddingRequestSchema,
  errorBody,
  openAiFinishReason,
  parseBody,
  samplingParams,
  TokenizeRequestSchema,
  usage,
} from './openai.js';
import { jsonTemplate, SseWriter, StreamPacer } from './sse.js';
import { chatOutput } from './tools.js';
import { boundedEngineServer, engineConnectionCap } from './listener.js';
import {
  compileBuiltinEngineOptions,
  sequenceLayout,
  type BuiltinEngineOptions,
  type CompiledBuiltinEngineOptions,
} from './options.js';

/** Largest request body; a chat that needs more would not fit a CPU engine's context anyway. */
const BODY_LIMIT_BYTES = 8 * 2 ** 20;

export type BuiltinEngineState = 'loading' | 'ready' | 'failed' | 'stopping';

export interface BuiltinEngineStats {
  readonly state: BuiltinEngineState;
  /** Generation and embedding requests answered to the end. */
  readonly requestsServed: number;
  /** Requests whose client went away before the answer was complete; their generation was stopped. */
  readonly requestsAborted: number;
  readonly requestsInFlight: number;
  /** Requests waiting for one of the --parallel sequences to come free. */
  readonly requestsWaiting: number;
  /** Requests refused because every sequence was busy and the queue full (429 LLMGW_ENGINE_BUSY). */
  readonly requestsRefusedBusy: number;
  /** Share of the sequences' KV cells that generating requests hold, 0 to 1. */
  readonly kvCacheUsage: number;
  /** Prompt tokens of every request run (embeddings included), and tokens generated. */
  readonly promptTokens: number;
  readonly generatedTokens: number;
}

export interface BuiltinEngine {
  /** `http://host:port`, with the port actually bound. */
  readonly url: string;
  readonly host: string;
  readonly port: number;
  readonly modelNames: readonly string[];
  readonly facts: GgufModelFacts;
  /** Resolves once the model is loaded and requests are served; rejects with LLMGW_ENGINE_START_FAILED if it cannot load. */
  readonly ready: Promise<void>;
  stats(): BuiltinEngineStats;
  /** Stops generating, closes the listener and frees the model. Safe to call twice. */
  close(): Promise<void>;
}

const ROUTES: Readonly<Record<string, string>> = {
  '/health': 'GET',
  '/metrics': 'GET',
  '/v1/models': 'GET',
  '/v1/chat/completions': 'POST',
  '/v1/completions': 'POST',
  '/v1/embeddings': 'POST',
  '/tokenize': 'POST',
  '/detokenize': 'POST',
  '/kv-events': 'GET',
};

/** An answer that is not a 200: status, code and the sentence the client sees. */
function httpError(status: number, code: ConstructorParameters<typeof LlmgwError>[0], message: string): LlmgwError {
  return new LlmgwError(code, message, { status });
}

async function readJsonBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let lengthBytes = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    lengthBytes += chunk.length;
    if (lengthBytes > BODY_LIMIT_BYTES) {
      throw httpError(
        413,
        'LLMGW_BODY_TOO_LARGE',
        `the body is over ${BODY_LIMIT_BYTES} bytes; send a shorter request`,
      );
    }
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch (err) {
    throw httpError(
      400,
      'LLMGW_INVALID_JSON',
      `the body is not valid JSON (${err instanceof Error ? err.message : String(err)})`,
    );
  }
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

/** What the engine is built from besides its options; tests replace parts. */
export interface BuiltinEngineDeps {
  /** Loads the model; absent means BuiltinRuntime.load. Tests wrap it to hold the engine in "loading". */
  loadRuntime?: (options: CompiledBuiltinEngineOptions, facts: GgufModelFacts) => Promise<BuiltinRuntime>;
}

/**
 * Starts the builtin engine: validates the GGUF (LLMGW_GGUF_INVALID before
 * anything listens), binds the listener, then loads the model in the
 * background. Resolves once listening; await `ready` for the model.
 */
export async function startBuiltinEngine(
  options: BuiltinEngineOptions,
  deps: BuiltinEngineDeps = {},
): Promise<BuiltinEngine> {
  const o = compileBuiltinEngineOptions(options);
  const facts = await readGgufModelFacts(o.modelPath);
  return BuiltinEngineServer.start(o, facts, deps.loadRuntime ?? ((opts, f) => BuiltinRuntime.load(opts, f)));
}

class BuiltinEngineServer implements BuiltinEngine {
  private state: BuiltinEngineState = 'loading';
  private runtime: BuiltinRuntime | undefined;
  private loadError: LlmgwError | undefined;
  private requestsServed = 0;
  private requestsAborted = 0;
  private requestsRefusedBusy = 0;
  private promptTokens = 0;
  private generatedTokens = 0;
  private readonly active = new Set<AbortController>();
  private readonly handlers = new Set<Promise<void>>();
  private closing: Promise<void> | undefined;
  readonly ready: Promise<void>;
  readonly host: string;
  readonly port: number;
  readonly url: string;
  readonly modelNames: readonly string[];
  private readonly createdSec: number;
  /** Shared by every stream this engine writes, so that together they keep to --stream-interval-ms. */
  private readonly pacer: StreamPacer;

  private constructor(
    private readonly options: CompiledBuiltinEngineOptions,
    readonly facts: GgufModelFacts,
    private readonly server: Server | HttpsServer,
    private readonly loadRuntime: NonNullable<BuiltinEngineDeps['loadRuntime']>,
  ) {
    const address = server.address() as AddressInfo;
    this.host = options.host;
    this.port = address.port;
    this.url = `${options.tlsCert === undefined ? 'http' : 'https'}://${options.host.includes(':') ? `[${options.host}]` : options.host}:${address.port}`;
    this.modelNames = options.modelNames;
    this.createdSec = Math.floor(options.nowMs() / 1000);
    this.pacer = new StreamPacer(options.streamIntervalMs);
    this.ready = this.load();
    // `ready` is for callers to await; an unawaited load failure is already in state and the log.
    this.ready.catch(() => undefined);
  }

  static async start(
    options: CompiledBuiltinEngineOptions,
    facts: GgufModelFacts,
    loadRuntime: NonNullable<BuiltinEngineDeps['loadRuntime']>,
  ): Promise<BuiltinEngineServer> {
    // Read before binding: a wrong path fails the start naming the flag, with nothing listening.
    const tls = readServerTls(options.tlsCert, options.tlsKey, { cert: '--tls-cert', key: '--tls-key' });
    // As many connections as it can run and queue requests, and some spare (listener.ts); the runtime lays the same out.
    const layout = sequenceLayout(options, facts.trainedContextTokens);
    const server = boundedEngineServer(tls, engineConnectionCap(layout, openFileLimit()), options.log);
    await new Promise<void>((resolve, reject) => {
      server.once('error', (err: NodeJS.ErrnoException) => {
        reject(
          new LlmgwError(
            'LLMGW_ENGINE_START_FAILED',
            err.code === 'EADDRINUSE'
              ? `port ${options.port} on ${options.host} is already in use; pick another --port`
              : `the builtin engine cannot listen on ${options.host}:${options.port}: ${err.message}`,
            { cause: err },
          ),
        );
      });
      server.listen(options.port, options.host, () => resolve());
    });
    const engine = new BuiltinEngineServer(options, facts, server, loadRuntime);
    server.on('request', (req: IncomingMessage, res: ServerResponse) => engine.track(req, res));
    return engine;
  }

  stats(): BuiltinEngineStats {
    const load = this.runtime?.load ?? { inFlight: 0, waiting: 0, kvCacheUsage: 0 };
    return {
      state: this.state,
      requestsServed: this.requestsServed,
      requestsAborted: this.requestsAborted,
      requestsInFlight: load.inFlight,
      requestsWaiting: load.waiting,
      requestsRefusedBusy: this.requestsRefusedBusy,
      kvCacheUsage: load.kvCacheUsage,
      promptTokens: this.promptTokens,
      generatedTokens: this.generatedTokens,
    };
  }

  close(): Promise<void> {
    this.closing ??= this.shutDown();
    return this.closing;
  }

  private async shutDown(): Promise<void> {
    this.state = 'stopping';
    for (const controller of this.active) controller.abort(new Error('the engine is stopping'));
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections();
    await Promise.allSettled([...this.handlers]);
    this.server.closeAllConnections();
    await closed;
    // A model still loading is freed once it has loaded.
    await this.ready.catch(() => undefined);
    await this.runtime?.dispose();
    this.runtime = undefined;
  }

  private async load(): Promise<void> {
    const startedMs = this.options.nowMs();
    try {
      const runtime = await this.loadRuntime(this.options, this.facts);
      if (this.state === 'stopping') {
        this.runtime = runtime;
        return;
      }
      this.runtime = runtime;
      this.state = 'ready';
      this.options.log(
        `builtin engine loaded ${this.options.modelPath} in ${this.options.nowMs() - startedMs} ms: ` +
          `${runtime.parallel} sequence(s) of ${runtime.sequenceContextTokens} tokens, ${this.options.threads} thread(s), ${runtime.binary}`,
      );
    } catch (err) {
      this.state = this.state === 'stopping' ? 'stopping' : 'failed';
      this.loadError = isLlmgwError(err)
        ? err
        : new LlmgwError('LLMGW_ENGINE_START_FAILED', String(err), { cause: err });
      this.options.log(`builtin engine failed to load: ${this.loadError.message}`);
      throw this.loadError;
    }
  }

  private track(req: IncomingMessage, res: ServerResponse): void {
    const handled = this.handle(req, res).finally(() => this.handlers.delete(handled));
    this.handlers.add(handled);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const controller = new AbortController();
    this.active.add(controller);
    // 'close' before the answer is finished means the client went away: stop generating for it.
    res.on('close', () => {
      if (!res.writableFinished) controller.abort(new Error('the client went away'));
    });
    try {
      await this.route(req, res, controller.signal);
    } catch (err) {
      this.fail(res, err);
    } finally {
      this.active.delete(controller);
    }
  }

  private fail(res: ServerResponse, err: unknown): void {
    const known = isLlmgwError(err) ? err : undefined;
    if (!known || known.status >= 500)
      this.options.log(
        `builtin engine request failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`,
      );
    if (res.writableEnded || res.destroyed) return;
    const status = known?.status ?? 500;
    // 5xx bodies never carry internals; the log above has them.
    const message = known ? known.message : 'the builtin engine failed to answer; its log has the details';
    const param = typeof known?.context.param === 'string' ? known.context.param : null;
    const body = errorBody(status, known?.code ?? 'LLMGW_INTERNAL', message, param);
    if (res.headersSent) {
      // Mid-stream: the only place left to say it is the stream itself.
      res.end(`data: ${JSON.stringify(body)}\n\n`);
      return;
    }
    const headers: Record<string, string> =
      typeof known?.context.allow === 'string' ? { allow: known.context.allow } : {};
    if (typeof known?.context.retryAfterSeconds === 'number')
      headers['retry-after'] = String(known.context.retryAfterSeconds);
    sendJson(res, status, body, headers);
  }

  private async route(req: IncomingMessage, res: ServerResponse, signal: AbortSignal): Promise<void> {
    const path = new URL(req.url ?? '/', 'http://engine').pathname.replace(/(.)\/+$/, '$1');
    const method = ROUTES[path];
    if (!method) {
      throw httpError(
        404,
        'LLMGW_NOT_FOUND',
        `no route ${req.method} ${path}; this engine serves ${Object.keys(ROUTES).join(', ')}`,
      );
    }
    if (req.method !== method && !(method === 'GET' && req.method === 'HEAD')) {
      throw new LlmgwError('LLMGW_METHOD_NOT_ALLOWED', `${path} takes ${method}, not ${req.method}`, {
        context: { allow: method },
      });
    }
    if (path === '/health') return this.health(res);
    // Open like /health: the agent scrapes it, as it scrapes vLLM's, without the API key.
    if (path === '/metrics') return this.metrics(res);
    if (
      this.options.apiKey !== undefined &&
      // /kv-events shows prompts' tokens, so it asks the key too, though it is outside /v1 (as the sim's does).
      (apiKeyGuards(path) || path === '/kv-events') &&
      !bearerMatches(req.headers.authorization, this.options.apiKey)
    ) {
      throw httpError(401, 'LLMGW_UNAUTHORIZED', API_KEY_REFUSAL);
    }
    const runtime = this.runtime;
    if (this.state !== 'ready' || !runtime) {
      const why =
        this.state === 'loading'
          ? 'the model is still loading; retry once GET /health answers 200'
          : `the engine is ${this.state}`;
      throw new LlmgwError('LLMGW_ENGINE_NOT_READY', why, { status: 503, context: { retryAfterSeconds: 1 } });
    }
    if (path === '/v1/models') {
      return sendJson(res, 200, {
        object: 'list',
        data: this.modelNames.map((id) => ({ id, object: 'model', created: this.createdSec, owned_by: 'llmgw' })),
      });
    }
    if (path === '/kv-events') return runtime.kvEvents.serve(res, signal);
    const body = await readJsonBody(req);
    if (path === '/v1/chat/completions') return this.chatCompletions(runtime, body, res, signal);
    if (path === '/v1/completions') return this.completions(runtime, body, res, signal);
    if (path === '/tokenize') return this.tokenize(runtime, body, res);
    if (path === '/detokenize') return this.detokenize(runtime, body, res);
    return this.embeddings(runtime, body, res, signal);
  }

  private health(res: ServerResponse): void {
    const stats = this.stats();
    if (stats.state !== 'ready') {
      return sendJson(res, 503, { status: stats.state, ...(this.loadError ? { error: this.loadError.message } : {}) });
    }
    sendJson(res, 200, {
      status: 'ok',
      model: this.modelNames[0],
      sequences: this.runtime?.parallel ?? 0,
      requests_in_flight: stats.requestsInFlight,
      requests_waiting: stats.requestsWaiting,
      requests_served: stats.requestsServed,
      requests_aborted: stats.requestsAborted,
    });
  }

  /**
   * Prometheus text in the names the router reads from vLLM (labelled with
   * the first model name, as vLLM labels its served name) and from
   * llama-server, so load-aware routing treats this engine like either.
   * Before the model loads the gauges read 0.
   */
  private metrics(res: ServerResponse): void {
    const s = this.stats();
    const label = `{model_name="${this.modelNames[0]!.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"}`;
    const metric = (name: string, type: 'gauge' | 'counter', help: string, value: number, labels = '') => [
      `# HELP ${name} ${help}`,
      `# TYPE ${name} ${type}`,
      `${name}${labels} ${value}`,
    ];
    const lines = [
      ...metric(
        'vllm:num_requests_running',
        'gauge',
        'Requests generating now, one per busy sequence.',
        s.requestsInFlight,
        label,
      ),
      ...metric(
        'vllm:num_requests_waiting',
        'gauge',
        'Requests waiting for a free sequence.',
        s.requestsWaiting,
        label,
      ),
      ...metric(
        'vllm:kv_cache_usage_perc',
        'gauge',
        'KV-cache usage by generating requests. 1 means 100 percent.',
        s.kvCacheUsage,
        label,
      ),
      ...metric('vllm:prompt_tokens_total', 'counter', 'Prompt tokens processed.', s.promptTokens, label),
      ...metric('vllm:generation_tokens_total', 'counter', 'Tokens generated.', s.generatedTokens, label),
      ...metric('llamacpp:requests_processing', 'gauge', 'Requests generating now.', s.requestsInFlight),
      ...metric('llamacpp:requests_deferred', 'gauge', 'Requests waiting for a free sequence.', s.requestsWaiting),
      ...metric('llamacpp:prompt_tokens_total', 'counter', 'Prompt tokens processed.', s.promptTokens),
      ...metric('llamacpp:tokens_predicted_total', 'counter', 'Tokens generated.', s.generatedTokens),
      ...metric(
        'llmgw_engine_requests_refused_busy_total',
        'counter',
        'Requests refused with 429 because every sequence was busy and the queue full.',
        s.requestsRefusedBusy,
      ),
      '',
    ];
    const body = lines.join('\n');
    res.writeHead(200, {
      'content-type': 'text/plain; version=0.0.4; charset=utf-8',
      'content-length': Buffer.byteLength(body),
    });
    res.end(body);
  }

  private checkModel(model: string): void {
    if (!this.modelNames.includes(model)) {
      throw new LlmgwError(
        'LLMGW_MODEL_NOT_FOUND',
        `this engine serves ${this.modelNames.map((n) => `"${n}"`).join(', ')}, not "${model}"`,
        {
          context: { param: 'model' },
        },
      );
    }
  }

  private async chatCompletions(
    runtime: BuiltinRuntime,
    raw: unknown,
    res: ServerResponse,
    signal: AbortSignal,
  ): Promise<void> {
    const request = parseBody(ChatCompletionRequestSchema, raw);
    this.checkModel(request.model);
    const turns = chatTurns(request);
    const output = chatOutput(request);
    const params = samplingParams(request, request.max_completion_tokens ?? request.max_tokens);
    const n = request.n ?? 1;
    const id = `chatcmpl-${randomUUID()}`;
    const head = {
      id,
      object: 'chat.completion.chunk',
      created: Math.floor(this.options.nowMs() / 1000),
      model: request.model,
    };
    // Each choice is its own generation on its own sequence (see choices.ts);
    // the prompt is one, so usage counts it once and the replies together.
    const answer = (onText: (index: number, text: string) => void) =>
      this.generate(id, signal, async () => {
        const choices = await runChoices(n, signal, (index, choiceSignal) =>
          runtime.chat(
            turns,
            { ...params, seed: choiceSeed(params.seed, index) },
            output,
            (text) => onText(index, text),
            choiceSignal,
          ),
        );
        return {
          choices,
          promptTokens: choices[0]!.promptTokens,
          completionTokens: choices.reduce((sum, c) => sum + c.completionTokens, 0),
          finishReason: choices.some((c) => c.finishReason === 'aborted') ? ('aborted' as const) : ('stop' as const),
        };
      });
    if (!request.stream) {
      const result = await answer(() => undefined);
      if (!result) return;
      return sendJson(res, 200, {
        id,
        object: 'chat.completion',
        created: head.created,
        model: request.model,
        choices: result.choices.map((choice, index) => chatChoice(index, choice)),
        usage: usage(result.promptTokens, result.completionTokens),
      });
    }
    const includeUsage = request.stream_options?.include_usage === true;
    // OpenAI sends `usage: null` on every chunk but the last when usage was asked for.
    const chunk = (choice: object) => ({ ...head, choices: [choice], ...(includeUsage ? { usage: null } : {}) });
    const stream = new SseWriter(
      res,
      () =>
        Array.from({ length: n }, (_, index) =>
          chunk({ index, delta: openingDelta(output), logprobs: null, finish_reason: null }),
        ),
      this.pacer,
    );
    const deltas = Array.from({ length: n }, () => new ChoiceDeltas(output));
    const contentChunk = Array.from({ length: n }, (_, index) =>
      jsonTemplate((content) => chunk({ index, delta: { content }, logprobs: null, finish_reason: null })),
    );
    const result = await answer((index, text) => {
      const choice = deltas[index]!;
      if (choice.textIsContent) return stream.sendJson(contentChunk[index]!(text));
      const delta = choice.text(text);
      if (delta) stream.send(chunk({ index, delta, logprobs: null, finish_reason: null }));
    });
    if (!result) return;
    for (const [index, choice] of result.choices.entries()) {
      for (const delta of deltas[index]!.end(choice))
        stream.send(chunk({ index, delta, logprobs: null, finish_reason: null }));
      // Logprobs are computed once the reply is whole (see logprobs.ts), so they ride on the finish chunk.
      stream.send(
        chunk({
          index,
          delta: {},
          logprobs: chatLogprobs(choice.logprobs),
          finish_reason: openAiFinishReason(choice.finishReason),
        }),
      );
    }
    if (includeUsage) stream.send({ ...head, choices: [], usage: usage(result.promptTokens, result.completionTokens) });
    stream.done();
  }

  /**
   * POST /tokenize in vLLM's shape ({count, max_model_len, tokens,
   * token_strs?}): text as a completion prompt counts it, chat messages
   * under the model's template as chat counts them (so the router's
   * count_tokens agrees with usage); llama.cpp's `content` answers
   * llama.cpp's {tokens}. Needs no sequence: it never waits behind generation.
   */
  private tokenize(runtime: BuiltinRuntime, raw: unknown, res: ServerResponse): void {
    const request = parseBody(TokenizeRequestSchema, raw);
    if (request.model != null) this.checkModel(request.model);
    if (request.prompt === undefined && request.messages === undefined && request.content !== undefined) {
      return sendJson(res, 200, { tokens: runtime.textTokens(request.content, request.add_special === true) });
    }
    let tokens: number[];
    if (request.messages !== undefined) {
      const chat = parseBody(ChatCompletionRequestSchema, {
        model: request.model ?? this.modelNames[0],
        messages: request.messages,
        ...(request.tools == null ? {} : { tools: request.tools }),
        ...(request.tool_choice === undefined ? {} : { tool_choice: request.tool_choice }),
      });
      tokens = runtime.chatTokens(chatTurns(chat), chatOutput(chat));
    } else {
      tokens = runtime.textTokens(request.prompt ?? request.content ?? '', request.add_special_tokens !== false);
    }
    sendJson(res, 200, {
      count: tokens.length,
      max_model_len: runtime.sequenceContextTokens,
      tokens,
      ...(request.return_token_strs === true ? { token_strs: tokens.map((t) => runtime.detokenize([t])) } : {}),
    });
  }

  /** POST /detokenize: vLLM's {prompt}; an id outside the vocabulary is a 400 naming it (llama.cpp itself would not check). */
  private detokenize(runtime: BuiltinRuntime, raw: unknown, res: ServerResponse): void {
    const request = parseBody(DetokenizeRequestSchema, raw);
    if (request.model != null) this.checkModel(request.model);
    const vocabulary = this.facts.vocabularySize;
    // 0 = the file does not say (gguf-check.ts): nothing to check against.
    const outside = vocabulary > 0 ? request.tokens.findIndex((t) => t >= vocabulary) : -1;
    if (outside !== -1) {
      throw new LlmgwError(
        'LLMGW_BAD_REQUEST',
        `tokens[${outside}]: ${request.tokens[outside]} is outside this model's vocabulary of ${vocabulary} tokens`,
        {
          context: { param: 'tokens' },
        },
      );
    }
    sendJson(res, 200, { prompt: runtime.detokenize(request.tokens) });
  }

  private async completions(
    runtime: BuiltinRuntime,
    raw: unknown,
    res: ServerResponse,
    signal: AbortSignal,
  ): Promise<void> {
    const request = parseBody(CompletionRequestSchema, raw);
    this.checkModel(request.model);
    const prompt = completionPrompt(request);
    const params = samplingParams(request, request.max_tokens);
    const id = `cmpl-${randomUUID()}`;
    const head = {
      id,
      object: 'text_completion',
      created: Math.floor(this.options.nowMs() / 1000),
      model: request.model,
    };
    if (!request.stream) {
      const result = await this.generate(id, signal, () => runtime.complete(prompt, params, () => undefined, signal));
      if (!result) return;
      return sendJson(res, 200, {
        ...head,
        choices: [
          {
            text: result.text,
            index: 0,
            logprobs: completionLogprobs(result.logprobs),
            finish_reason: openAiFinishReason(result.finishReason),
          },
        ],
        usage: usage(result.promptTokens, result.completionTokens),
      });
    }
    const includeUsage = request.stream_options?.include_usage === true;
    const chunk = (text: string, finish: string | null, logprobs: ReturnType<typeof completionLogprobs> = null) => ({
      ...head,
      choices: [{ text, index: 0, logprobs, finish_reason: finish }],
      ...(includeUsage ? { usage: null } : {}),
    });
    const stream = new SseWriter(res, () => [], this.pacer);
    const textChunk = jsonTemplate((text) => chunk(text, null));
    const result = await this.generate(id, signal, () =>
      runtime.complete(prompt, params, (text) => stream.sendJson(textChunk(text)), signal),
    );
    if (!result) return;
    stream.send(chunk('', openAiFinishReason(result.finishReason), completionLogprobs(result.logprobs)));
    if (includeUsage) stream.send({ ...head, choices: [], usage: usage(result.promptTokens, result.completionTokens) });
    stream.done();
  }

  private async embeddings(
    runtime: BuiltinRuntime,
    raw: unknown,
    res: ServerResponse,
    signal: AbortSignal,
  ): Promise<void> {
    const request = parseBody(EmbeddingRequestSchema, raw);
    this.checkModel(request.model);
    if (request.dimensions != null && request.dimensions !== this.facts.embeddingLength) {
      throw new LlmgwError(
        'LLMGW_BAD_REQUEST',
        `this model's embeddings have ${this.facts.embeddingLength} dimensions and cannot be shortened; leave dimensions out`,
        { context: { param: 'dimensions' } },
      );
    }
    const inputs = typeof request.input === 'string' ? [request.input] : request.input;
    const id = `embd-${randomUUID()}`;
    const result = await this.generate(id, signal, async () => {
      const embedded = await runtime.embed(inputs, signal);
      return { ...embedded, completionTokens: 0, finishReason: 'stop' as const };
    });
    if (!result) return;
    const base64 = request.encoding_format === 'base64';
    sendJson(res, 200, {
      object: 'list',
      data: result.vectors.map((vector, index) => ({
        object: 'embedding',
        index,
        embedding: base64 ? base64Embedding(vector) : vector,
      })),
      model: request.model,
      usage: { prompt_tokens: result.promptTokens, total_tokens: result.promptTokens },
    });
  }

  /**
   * Runs one request's work and settles the counters. Returns undefined when
   * the client went away (nobody is left to answer), after logging it.
   */
  private async generate<T extends Pick<GenerationResult, 'promptTokens' | 'completionTokens' | 'finishReason'>>(
    id: string,
    signal: AbortSignal,
    work: () => Promise<T>,
  ): Promise<T | undefined> {
    let result: T;
    try {
      result = await work();
    } catch (err) {
      if (isLlmgwError(err) && err.code === 'LLMGW_ENGINE_BUSY') this.requestsRefusedBusy++;
      if (!signal.aborted) throw err;
      this.requestsAborted++;
      this.options.log(
        `builtin engine request ${id} aborted before generating: ${String((signal.reason as Error)?.message ?? signal.reason)}`,
      );
      return undefined;
    }
    // Counted whether or not the client stayed: the engine did the work.
    this.promptTokens += result.promptTokens;
    this.generatedTokens += result.completionTokens;
    if (result.finishReason === 'aborted') {
      this.requestsAborted++;
      this.options.log(
        `builtin engine request ${id} aborted after ${result.completionTokens} tokens: ${String((signal.reason as Error)?.message ?? signal.reason)}`,
      );
      return undefined;
    }
    this.requestsServed++;
    return result;
  }
}
