// The sim engine's HTTP server: OpenAI's endpoints as vLLM serves them, on
// node:http directly, because in a router benchmark the engine must never be
// the bottleneck. Per request it parses the body once, hashes the prompt once
// and writes SSE chunks from string templates and precomputed token JSON,
// corked per batch; everything slow (time to first token, token rate,
// capacity, failures, crashes, hangs) is simulated on purpose, by option.
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import { API_KEY_REFUSAL, apiKeyGuards, bearerMatches } from '../api-key.js';
import { LlmgwError, isLlmgwError } from '../../errors/index.js';
import { readServerTls } from '../../tls/index.js';
import {
  ChoiceGenerator,
  FIRST_TOKEN_JSON,
  NEXT_TOKEN_JSON,
  VOCABULARY,
  embeddingOf,
  mixSeed,
  nextRandom,
} from './generate.js';
import { compileSimEngineOptions, type SimEngineConfig, type SimEngineOptions } from './options.js';
import { readForm } from '../../http/multipart.js';
import {
  detokenizeAnswer,
  rerankAnswer,
  scoreAnswer,
  SimTokenizer,
  tokenizeAnswer,
  transcriptionAnswer,
  type PassthroughAnswer,
} from './passthrough.js';
import { SimKvCache } from './kv-cache.js';
import { bindZmqKvPublisher, KvEventHub } from './kv-publish.js';
import { parseResponsesRequest, responseObject, responsesEvent, type ResponsesRequest } from './responses.js';
import {
  parseChatRequest,
  parseCompletionRequest,
  parseEmbeddingRequest,
  type EmbeddingRequest,
  type GenerationRequest,
} from './requests.js';

/** Counters for tests and benchmarks; a snapshot, so later requests do not change it. */
export interface SimEngineStats {
  /** Inference requests received (chat, completions, embeddings, and the pass-through ones: rerank, score, audio, tokenize), whatever became of them. */
  readonly requestsSeen: number;
  /** Inference requests whose response ended: answered, refused, failed or aborted. */
  readonly requestsEnded: number;
  /** Inference requests whose client went away before the response ended (waiting or running). */
  readonly requestsAborted: number;
  /** Answered 429 because `maxConcurrency` was reached with overflow 'reject'. */
  readonly requestsRejected: number;
  /** Answered 500 by the injected error rate. */
  readonly requestsFailed: number;
  /** Admitted and generating now. */
  readonly running: number;
  /** Queued behind `maxConcurrency`. */
  readonly waiting: number;
  /** running + waiting. */
  readonly inFlight: number;
  /** Requests of any path held open unanswered by hang mode. */
  readonly hanging: number;
  /** Prompt tokens of admitted requests, counted as the module comment of generate.ts says. */
  readonly promptTokens: number;
  /** Tokens generated and handed to the socket (an aborted stream counts what it sent). */
  readonly generatedTokens: number;
  /** Prompt tokens looked up in the simulated KV cache (0 without one), as vLLM's prefix_cache_queries. */
  readonly prefixCacheQueries: number;
  /** Of those, tokens found cached, as vLLM's prefix_cache_hits. */
  readonly prefixCacheHits: number;
}

/** How the engine stopped: close() was called, or `crashAfterRequests` was reached. */
export type SimEngineEnd = 'closed' | 'crashed';

export interface SimEngine {
  /** http://host:port, IPv6 hosts in brackets. */
  readonly url: string;
  readonly host: string;
  /** The bound port (the one the OS picked when the options said 0). */
  readonly port: number;
  readonly config: SimEngineConfig;
  /**
   * The ZeroMQ addresses the KV events are published on, ports resolved;
   * undefined = no ZeroMQ publisher (kvEventsEndpoint not set).
   */
  readonly kvEvents: { readonly endpoint: string; readonly replayEndpoint?: string } | undefined;
  /** Settles once the server has stopped, with why. Never rejects. */
  readonly ended: Promise<SimEngineEnd>;
  stats(): SimEngineStats;
  /**
   * Stops gracefully: no new connections, /health and new requests 503,
   * queued requests 503, hung ones cut, running ones given `graceMs`
   * (absent = the configured shutdownGraceMs; 0 = cut at once) to finish.
   */
  close(options?: { graceMs?: number }): Promise<void>;
}

/** Bodies larger than this are refused with 413: no OpenAI request of a test or benchmark comes near it. */
const MAX_BODY_BYTES = 16 * 2 ** 20;
/** Tokens written per event-loop turn when unpaced, so one long stream cannot starve the others. */
const UNPACED_BATCH_STEPS = 64;
/** Tokens generated without a max_tokens, as the brief of the sim fixes it (vLLM uses the context left). */
const DEFAULT_MAX_TOKENS = 16;

const JSON_HEADERS = { 'content-type': 'application/json' } as const;

/** Paths answered beside generation (passthrough.ts), as vLLM serves them. */
const PASSTHROUGH_PATHS: ReadonlySet<string> = new Set([
  '/v1/rerank',
  '/rerank',
  '/v2/rerank',
  '/v1/score',
  '/score',
  '/v1/audio/transcriptions',
  '/tokenize',
  '/detokenize',
]);

type JobState = 'reading' | 'waiting' | 'running' | 'ended';

/** One inference request through its life; `start` runs once it is admitted. */
interface Job {
  readonly res: ServerResponse;
  state: JobState;
  timer: NodeJS.Timeout | null;
  immediate: NodeJS.Immediate | null;
  start: (() => void) | null;
}

interface Counters {
  requestsSeen: number;
  requestsEnded: number;
  requestsAborted: number;
  requestsRejected: number;
  requestsFailed: number;
  running: number;
  waiting: number;
  hanging: number;
  promptTokens: number;
  generatedTokens: number;
  prefixCacheQueries: number;
  prefixCacheHits: number;
}

/** Starts a sim engine and resolves once it listens. Throws LLMGW_CONFIG_INVALID or LLMGW_ENGINE_START_FAILED. */
export async function startSimEngine(options: SimEngineOptions = {}): Promise<SimEngine> {
  return SimServer.start(compileSimEngineOptions(options));
}

class SimServer implements SimEngine {
  readonly config: SimEngineConfig;
  readonly ended: Promise<SimEngineEnd>;
  url = '';
  host = '';
  port = 0;

  private readonly server: Server | HttpsServer;
  private readonly counters: Counters = {
    requestsSeen: 0,
    requestsEnded: 0,
    requestsAborted: 0,
    requestsRejected: 0,
    requestsFailed: 0,
    running: 0,
    waiting: 0,
    hanging: 0,
    promptTokens: 0,
    generatedTokens: 0,
    prefixCacheQueries: 0,
    prefixCacheHits: 0,
  };
  /** Null = no simulated KV cache (kvCacheBlocks 0). */
  private readonly kvCache: SimKvCache | null;
  private readonly kvHub: KvEventHub | null;
  kvEvents: { endpoint: string; replayEndpoint?: string } | undefined;
  private readonly modelNames: ReadonlySet<string>;
  private readonly canonicalModel: string;
  private readonly errorRng: { s: number };
  private readonly idBase = randomBytes(5).toString('hex');
  private readonly tokenizer = new SimTokenizer();
  /** FIFO behind maxConcurrency; entries before queueHead are spent, ended ones are skipped. */
  private readonly queue: (Job | undefined)[] = [];
  private queueHead = 0;
  private readonly held = new Set<ServerResponse>();
  private nextId = 0;
  private startedAtMs = 0;
  private ready: boolean;
  private hanging: boolean;
  private closing = false;
  private endReason: SimEngineEnd | null = null;
  private graceTimer: NodeJS.Timeout | null = null;
  private resolveEnded!: (end: SimEngineEnd) => void;

  static async start(config: SimEngineConfig): Promise<SimServer> {
    const sim = new SimServer(config);
    await sim.listen();
    if (config.kvEventsEndpoint !== undefined) {
      try {
        await sim.bindKvEvents(config.kvEventsEndpoint);
      } catch (err) {
        await sim.close({ graceMs: 0 });
        throw new LlmgwError(
          'LLMGW_ENGINE_START_FAILED',
          `the sim engine cannot publish KV events on ${config.kvEventsEndpoint} (${(err as Error).message}); pick another address`,
          { cause: err },
        );
      }
    }
    return sim;
  }

  private constructor(config: SimEngineConfig) {
    this.config = config;
    this.modelNames = new Set(config.models);
    this.canonicalModel = config.models[0]!;
    this.errorRng = { s: mixSeed(0x5eed, config.seed, 0xe44) };
    this.ready = config.startupDelayMs === 0;
    this.hanging = config.hang;
    this.kvCache = config.kvCacheBlocks > 0 ? new SimKvCache(config.kvCacheBlocks, config.kvBlockSize) : null;
    this.kvHub = this.kvCache === null ? null : new KvEventHub(config.kvBlockSize, config.flavor);
    this.ended = new Promise((resolve) => (this.resolveEnded = resolve));
    // keepAliveTimeout as uvicorn's (vLLM, SGLang): 5 s. requestTimeout 0: a hung
    // request must stay hung for as long as the test that asked for it wants.
    const serverOptions = { keepAliveTimeout: 5000, requestTimeout: 0, noDelay: true };
    const onRequest = (req: IncomingMessage, res: ServerResponse) => this.onRequest(req, res);
    // Files are read once, here: a wrong path fails the start, naming the flag, before anything listens.
    const tls = readServerTls(config.tlsCert, config.tlsKey, {
      cert: 'tlsCert (--tls-cert)',
      key: 'tlsKey (--tls-key)',
    });
    this.server = tls
      ? createHttpsServer({ ...serverOptions, ...tls }, onRequest)
      : createServer(serverOptions, onRequest);
    this.server.on('close', () => {
      if (this.graceTimer) clearTimeout(this.graceTimer);
      this.resolveEnded(this.endReason ?? 'closed');
    });
  }

  private listen(): Promise<void> {
    return new Promise((resolve, reject) => {
      const onError = (err: NodeJS.ErrnoException) => {
        reject(
          new LlmgwError(
            'LLMGW_ENGINE_START_FAILED',
            `the sim engine cannot listen on ${this.config.host}:${this.config.port} (${err.code ?? err.message}); pick another port or 0 for any free one`,
            { cause: err, context: { host: this.config.host, port: this.config.port } },
          ),
        );
      };
      this.server.once('error', onError);
      this.server.listen({ host: this.config.host, port: this.config.port }, () => {
        this.server.off('error', onError);
        const address = this.server.address();
        if (address === null || typeof address === 'string') {
          reject(new LlmgwError('LLMGW_ENGINE_START_FAILED', 'the sim engine bound something that is not a TCP port'));
          return;
        }
        this.host = address.address;
        this.port = address.port;
        this.url = `${this.config.tlsCert === undefined ? 'http' : 'https'}://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`;
        this.startedAtMs = this.config.nowMs();
        resolve();
      });
    });
  }

  private async bindKvEvents(endpoint: string): Promise<void> {
    const hub = this.kvHub!;
    const zmq = await bindZmqKvPublisher(
      { endpoint, replayEndpoint: this.config.kvEventsReplayEndpoint, topic: this.config.kvEventsTopic },
      this.config.flavor,
      () => hub.history(),
    );
    hub.attachZmq(zmq);
    this.kvEvents =
      zmq.replayEndpoint === undefined
        ? { endpoint: zmq.endpoint }
        : { endpoint: zmq.endpoint, replayEndpoint: zmq.replayEndpoint };
  }

  stats(): SimEngineStats {
    const c = this.counters;
    return { ...c, inFlight: c.running + c.waiting };
  }

  close(options: { graceMs?: number } = {}): Promise<void> {
    // A second close asking for no grace (a second SIGTERM) cuts what is left at once.
    if (this.closing && options.graceMs === 0) this.server.closeAllConnections();
    if (!this.closing) {
      this.closing = true;
      this.kvHub?.close();
      this.server.close();
      this.server.closeIdleConnections();
      for (let i = this.queueHead; i < this.queue.length; i++) {
        const job = this.queue[i];
        if (job?.state === 'waiting')
          sendError(
            job.res,
            503,
            'ServiceUnavailableError',
            'the sim engine is shutting down; retry on another replica',
            null,
            true,
          );
      }
      for (const res of this.held) res.destroy();
      if (this.counters.running === 0) this.server.closeAllConnections();
      else
        this.graceTimer = setTimeout(
          () => this.server.closeAllConnections(),
          options.graceMs ?? this.config.shutdownGraceMs,
        );
    }
    return this.ended.then(() => undefined);
  }

  /** What --crash-after asks for: everything cut at once, as if the process died. */
  private crash(): void {
    if (this.endReason !== null || this.closing) return;
    this.endReason = 'crashed';
    this.closing = true;
    this.kvHub?.close();
    this.server.close();
    this.server.closeAllConnections();
  }

  private isReady(): boolean {
    if (this.ready) return true;
    if (this.config.nowMs() - this.startedAtMs < this.config.startupDelayMs) return false;
    this.ready = true;
    return true;
  }

  private onRequest(req: IncomingMessage, res: ServerResponse): void {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    const method = req.method;
    if (this.hanging) {
      this.hold(req, res);
      return;
    }
    if (
      this.config.apiKey !== undefined &&
      apiKeyGuards(path) &&
      !bearerMatches(req.headers.authorization, this.config.apiKey)
    ) {
      req.resume();
      sendError(res, 401, 'AuthenticationError', API_KEY_REFUSAL, null, this.closing);
      return;
    }
    if (method === 'POST') {
      if (
        path === '/v1/chat/completions' ||
        path === '/v1/completions' ||
        path === '/v1/embeddings' ||
        path === '/v1/responses' ||
        PASSTHROUGH_PATHS.has(path)
      ) {
        this.onInference(path, req, res);
        return;
      }
    } else if (method === 'GET' || method === 'HEAD') {
      if (path === '/health') return this.onHealth(res);
      if (path === '/metrics') return this.onMetrics(res);
      if (path === '/v1/models') return this.onModels(res);
      if (path === '/kv-events' && this.kvCache !== null) return this.onKvEvents(req, res);
    }
    req.resume();
    sendError(res, 404, 'NotFoundError', `the sim engine has no route ${method ?? ''} ${path}`, null, this.closing);
  }

  /** Hang mode: read the request, never answer; close() or the client ends it. */
  private hold(req: IncomingMessage, res: ServerResponse): void {
    req.resume();
    this.held.add(res);
    this.counters.hanging++;
    res.once('close', () => {
      this.held.delete(res);
      this.counters.hanging--;
    });
  }

  private onHealth(res: ServerResponse): void {
    if (this.closing) {
      sendJson(res, 503, '{"status":"shutting down"}', true);
    } else if (!this.isReady()) {
      sendJson(res, 503, '{"status":"loading"}', false);
    } else {
      sendJson(res, 200, this.config.flavor === 'llamacpp' ? '{"status":"ok"}' : '{}', false);
    }
  }

  /**
   * GET /kv-events: the simulated cache's events as JSON lines, opening with
   * a snapshot of what it holds. It shows prompts' tokens, so it asks the
   * API key whenever the engine has one, though it is outside /v1.
   */
  private onKvEvents(req: IncomingMessage, res: ServerResponse): void {
    req.resume();
    if (this.config.apiKey !== undefined && !bearerMatches(req.headers.authorization, this.config.apiKey))
      return sendError(res, 401, 'AuthenticationError', API_KEY_REFUSAL, null, this.closing);
    if (this.closing)
      return sendError(res, 503, 'ServiceUnavailableError', 'the sim engine is shutting down', null, true);
    this.kvHub!.openStream(res, this.kvCache!.snapshot(), this.closing);
  }

  private onModels(res: ServerResponse): void {
    if (!this.isReady())
      return sendError(
        res,
        503,
        'ServiceUnavailableError',
        'the model is still loading; retry when /health answers 200',
        null,
        false,
      );
    const created = Math.floor(Date.now() / 1000);
    const lenField = this.config.maxModelLen > 0 ? `,"max_model_len":${this.config.maxModelLen}` : '';
    const root = JSON.stringify(this.canonicalModel);
    const data = this.config.models.map(
      (name) =>
        `{"id":${JSON.stringify(name)},"object":"model","created":${created},"owned_by":"llmgw-sim","root":${root},"parent":null${lenField}}`,
    );
    sendJson(res, 200, `{"object":"list","data":[${data.join(',')}]}`, this.closing);
  }

  private onMetrics(res: ServerResponse): void {
    const c = this.counters;
    const label = `{model_name="${this.canonicalModel.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"}`;
    const usage = this.config.maxConcurrency > 0 ? c.running / this.config.maxConcurrency : 0;
    // The third name is the KV-cache gauge; llama.cpp removed its own, so none there.
    let names: [string, string, string | null, string, string];
    let labels = label;
    switch (this.config.flavor) {
      case 'llamacpp':
        names = [
          'llamacpp:requests_processing',
          'llamacpp:requests_deferred',
          null,
          'llamacpp:prompt_tokens_total',
          'llamacpp:tokens_predicted_total',
        ];
        labels = '';
        break;
      case 'sglang':
        names = [
          'sglang:num_running_reqs',
          'sglang:num_queue_reqs',
          'sglang:token_usage',
          'sglang:prompt_tokens_total',
          'sglang:generation_tokens_total',
        ];
        break;
      default:
        names = [
          'vllm:num_requests_running',
          'vllm:num_requests_waiting',
          'vllm:kv_cache_usage_perc',
          'vllm:prompt_tokens_total',
          'vllm:generation_tokens_total',
        ];
    }
    const lines = [
      `# HELP ${names[0]} Number of requests generating now.`,
      `# TYPE ${names[0]} gauge`,
      `${names[0]}${labels} ${c.running}`,
      `# HELP ${names[1]} Number of requests waiting to be processed.`,
      `# TYPE ${names[1]} gauge`,
      `${names[1]}${labels} ${c.waiting}`,
      ...(names[2] === null
        ? []
        : [
            `# HELP ${names[2]} KV-cache usage; the sim reports running / max concurrency (0 when unlimited). 1 means 100 percent.`,
            `# TYPE ${names[2]} gauge`,
            `${names[2]}${labels} ${usage}`,
          ]),
      `# HELP ${names[3]} Number of prefill tokens processed.`,
      `# TYPE ${names[3]} counter`,
      `${names[3]}${labels} ${c.promptTokens}`,
      `# HELP ${names[4]} Number of generation tokens processed.`,
      `# TYPE ${names[4]} counter`,
      `${names[4]}${labels} ${c.generatedTokens}`,
      ...this.prefixCacheMetrics(labels),
      '',
    ];
    const body = lines.join('\n');
    res.writeHead(200, {
      'content-type': 'text/plain; version=0.0.4; charset=utf-8',
      'content-length': Buffer.byteLength(body),
    });
    res.end(body);
  }

  /**
   * The prefix cache's hit counters under the names the real engine uses
   * (vLLM: prefix_cache_queries/hits in tokens; SGLang: cache_hit_rate);
   * none without a simulated cache, and none for llama.cpp, which has none.
   */
  private prefixCacheMetrics(labels: string): string[] {
    if (this.kvCache === null) return [];
    const c = this.counters;
    switch (this.config.flavor) {
      case 'vllm':
        return [
          '# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.',
          '# TYPE vllm:prefix_cache_queries_total counter',
          `vllm:prefix_cache_queries_total${labels} ${c.prefixCacheQueries}`,
          '# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.',
          '# TYPE vllm:prefix_cache_hits_total counter',
          `vllm:prefix_cache_hits_total${labels} ${c.prefixCacheHits}`,
        ];
      case 'sglang':
        return [
          '# HELP sglang:cache_hit_rate The prefix cache hit rate.',
          '# TYPE sglang:cache_hit_rate gauge',
          `sglang:cache_hit_rate${labels} ${c.prefixCacheQueries === 0 ? 0 : c.prefixCacheHits / c.prefixCacheQueries}`,
        ];
      default:
        return [];
    }
  }

  private onInference(path: string, req: IncomingMessage, res: ServerResponse): void {
    const c = this.counters;
    c.requestsSeen++;
    const job: Job = { res, state: 'reading', timer: null, immediate: null, start: null };
    res.once('close', () => this.onJobClose(job));
    // The N-th request of --hang-after is still served; everything after it hangs.
    if (this.config.hangAfterRequests > 0 && c.requestsSeen >= this.config.hangAfterRequests) this.hanging = true;
    if (this.closing) {
      req.resume();
      return sendError(
        res,
        503,
        'ServiceUnavailableError',
        'the sim engine is shutting down; retry on another replica',
        null,
        true,
      );
    }
    if (!this.isReady()) {
      req.resume();
      return sendError(
        res,
        503,
        'ServiceUnavailableError',
        'the model is still loading; retry when /health answers 200',
        null,
        false,
      );
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY_BYTES) chunks.push(chunk);
    });
    req.on('end', () => {
      if (job.state !== 'reading') return;
      if (size > MAX_BODY_BYTES) {
        return sendError(
          res,
          413,
          'BadRequestError',
          `the request body is over ${MAX_BODY_BYTES} bytes; send less`,
          null,
          true,
        );
      }
      const raw = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      if (path === '/v1/audio/transcriptions') return this.onTranscription(raw, req.headers['content-type'], job);
      try {
        this.dispatch(path, raw.toString('utf8'), job);
      } catch (err) {
        this.refuse(job, path, err);
      }
    });
  }

  /** A request's refusal: 4xx in OpenAI's shape, anything else a 500 with the details on stderr. */
  private refuse(job: Job, path: string, err: unknown): void {
    const res = job.res;
    if (res.headersSent) {
      res.destroy();
    } else if (isLlmgwError(err) && err.status < 500) {
      const param = typeof err.context.param === 'string' ? err.context.param : null;
      sendError(
        res,
        err.status,
        err.status === 404 ? 'NotFoundError' : 'BadRequestError',
        err.message,
        param,
        this.closing,
      );
    } else {
      process.emitWarning(
        `sim engine: internal error on ${path}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`,
      );
      sendError(
        res,
        500,
        'InternalServerError',
        'the sim engine failed unexpectedly; its stderr has the details',
        null,
        this.closing,
      );
    }
  }

  /** An audio upload: the form is read (with its file), then answered as the other pass-through requests are. */
  private onTranscription(raw: Buffer, contentType: string | undefined, job: Job): void {
    readForm(raw, contentType, { keepFiles: true }).then(
      (form) => {
        if (job.state !== 'reading') return;
        try {
          const answer = transcriptionAnswer(form);
          this.resolveModel(answer.model);
          if (this.injectFailure(job)) return;
          job.start = () => this.runPassthrough(job, answer);
          this.admit(job);
        } catch (err) {
          this.refuse(job, '/v1/audio/transcriptions', err);
        }
      },
      (err: unknown) => this.refuse(job, '/v1/audio/transcriptions', err),
    );
  }

  /** The answer of a pass-through request, after the time to first token (there is no other token to pace). */
  private runPassthrough(job: Job, answer: PassthroughAnswer): void {
    this.counters.promptTokens += answer.promptTokens;
    const send = () => {
      job.timer = null;
      if (job.state !== 'running' || job.res.headersSent || job.res.writableEnded) return;
      job.res.writeHead(answer.status, {
        'content-type': answer.contentType,
        'content-length': Buffer.byteLength(answer.body),
        ...(this.closing ? { connection: 'close' } : {}),
      });
      job.res.end(answer.body);
    };
    if (this.config.ttftMs > 0) job.timer = setTimeout(send, this.config.ttftMs);
    else send();
  }

  /** The answer to a JSON pass-through request (rerank, score, tokenize, detokenize); throws LLMGW_BAD_REQUEST naming the field. */
  private passthrough(path: string, o: Record<string, unknown>): PassthroughAnswer {
    const model = this.resolveModel(typeof o.model === 'string' ? o.model : undefined);
    switch (path) {
      case '/tokenize':
        return tokenizeAnswer(o, this.tokenizer, this.config.maxModelLen);
      case '/detokenize':
        return detokenizeAnswer(o, this.tokenizer, this.config.flavor === 'llamacpp');
      case '/v1/score':
      case '/score':
        return scoreAnswer(o, model, this.newId('score-'), this.config.seed);
      default:
        return rerankAnswer(o, model, this.newId('rerank-'), this.config.seed);
    }
  }

  private dispatch(path: string, text: string, job: Job): void {
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch (err) {
      throw new LlmgwError('LLMGW_INVALID_JSON', `the request body is not valid JSON: ${(err as Error).message}`, {
        context: { param: 'body' },
      });
    }
    if (PASSTHROUGH_PATHS.has(path)) {
      if (typeof body !== 'object' || body === null || Array.isArray(body))
        throw new LlmgwError('LLMGW_BAD_REQUEST', 'the request body must be a JSON object', {
          context: { param: 'body' },
        });
      const answer = this.passthrough(path, body as Record<string, unknown>);
      if (this.injectFailure(job)) return;
      job.start = () => this.runPassthrough(job, answer);
    } else if (path === '/v1/embeddings') {
      const request = parseEmbeddingRequest(body);
      const model = this.resolveModel(request.model);
      for (const input of request.inputs) this.checkContext(input.promptTokens, null);
      if (this.injectFailure(job)) return;
      job.start = () => this.runEmbedding(job, request, model);
    } else if (path === '/v1/responses') {
      const request = parseResponsesRequest(body);
      const model = this.resolveModel(request.generation.model);
      this.checkContext(request.generation.prompts[0]!.promptTokens, request.generation.maxTokens);
      if (this.injectFailure(job)) return;
      job.start = () => this.runResponses(job, request, model);
    } else {
      const request = path === '/v1/completions' ? parseCompletionRequest(body) : parseChatRequest(body);
      const model = this.resolveModel(request.model);
      for (const prompt of request.prompts) this.checkContext(prompt.promptTokens, request.maxTokens);
      if (this.injectFailure(job)) return;
      if (request.toolCall !== null) job.start = () => this.runToolCall(job, request, request.toolCall!, model);
      else
        job.start = request.stream
          ? () => this.runStream(job, request, model)
          : () => this.runWhole(job, request, model);
    }
    this.admit(job);
  }

  private resolveModel(requested: string | undefined): string {
    if (requested === undefined) return this.canonicalModel;
    if (this.modelNames.has(requested)) return requested;
    throw new LlmgwError(
      'LLMGW_MODEL_NOT_FOUND',
      `The model \`${requested}\` does not exist. This engine serves ${[...this.modelNames].join(', ')}.`,
      {
        context: { param: 'model' },
      },
    );
  }

  /** vLLM's two context checks: the prompt alone, then prompt plus an explicit max_tokens. */
  private checkContext(promptTokens: number, maxTokens: number | null): void {
    const limit = this.config.maxModelLen;
    if (limit === 0) return;
    if (promptTokens > limit) {
      throw new LlmgwError(
        'LLMGW_BAD_REQUEST',
        `This model's maximum context length is ${limit} tokens. However, your request has ${promptTokens} input tokens. Please reduce the length of the input messages.`,
        { context: { param: 'messages' } },
      );
    }
    if (maxTokens !== null && promptTokens + maxTokens > limit) {
      throw new LlmgwError(
        'LLMGW_BAD_REQUEST',
        `'max_tokens' or 'max_completion_tokens' is too large: ${maxTokens}. This model's maximum context length is ${limit} tokens and your request has ${promptTokens} input tokens (${maxTokens} > ${limit} - ${promptTokens}).`,
        { context: { param: 'max_tokens' } },
      );
    }
  }

  /** The error-rate draw, in arrival order from the seed, so a run is repeatable. True when it answered 500. */
  private injectFailure(job: Job): boolean {
    const rate = this.config.errorRate;
    if (rate === 0 || nextRandom(this.errorRng) / 2 ** 32 >= rate) return false;
    this.counters.requestsFailed++;
    sendError(
      job.res,
      500,
      'InternalServerError',
      `the sim engine failed this request on purpose (error rate ${rate})`,
      null,
      this.closing,
    );
    return true;
  }

  private admit(job: Job): void {
    const c = this.counters;
    const max = this.config.maxConcurrency;
    if (max === 0 || c.running < max) {
      job.state = 'running';
      c.running++;
      job.start!();
      return;
    }
    if (this.config.overflow === 'reject') {
      c.requestsRejected++;
      sendError(
        job.res,
        429,
        'RateLimitError',
        `the sim engine is at its concurrency limit of ${max}; retry after a second`,
        null,
        this.closing,
        { 'retry-after': '1' },
      );
      return;
    }
    job.state = 'waiting';
    c.waiting++;
    this.queue.push(job);
  }

  private onJobClose(job: Job): void {
    const c = this.counters;
    const was = job.state;
    job.state = 'ended';
    if (job.timer) clearTimeout(job.timer);
    if (job.immediate) clearImmediate(job.immediate);
    c.requestsEnded++;
    if (!job.res.writableEnded) c.requestsAborted++;
    if (was === 'waiting') c.waiting--;
    if (was === 'running') {
      c.running--;
      this.admitQueued();
    }
    if (this.closing && c.running === 0) this.server.closeAllConnections();
    if (this.config.crashAfterRequests > 0 && c.requestsEnded >= this.config.crashAfterRequests) this.crash();
  }

  private admitQueued(): void {
    const c = this.counters;
    const max = this.config.maxConcurrency;
    while (this.queueHead < this.queue.length && !this.closing && (max === 0 || c.running < max)) {
      const job = this.queue[this.queueHead];
      this.queue[this.queueHead++] = undefined;
      if (job?.state !== 'waiting') continue;
      c.waiting--;
      job.state = 'running';
      c.running++;
      job.start!();
    }
    if (this.queueHead > 1024 && this.queueHead * 2 > this.queue.length) {
      this.queue.splice(0, this.queueHead);
      this.queueHead = 0;
    }
  }

  private newId(prefix: string): string {
    return `${prefix}${this.idBase}${(++this.nextId).toString(36)}`;
  }

  /**
   * Time to first token for these prompts: ttftMs, plus prefillMsPerToken for
   * each prompt token the simulated KV cache does not hold (every token
   * without a cache). Looking up stores the prompts, so it runs once per
   * admitted request, and publishes what changed.
   */
  private firstTokenMs(prompts: GenerationRequest['prompts']): number {
    const perToken = this.config.prefillMsPerToken;
    const cache = this.kvCache;
    if (cache === null) {
      if (perToken === 0) return this.config.ttftMs;
      let tokens = 0;
      for (const p of prompts) tokens += p.promptTokens;
      return this.config.ttftMs + tokens * perToken;
    }
    let uncached = 0;
    for (const p of prompts) {
      const tokens = typeof p.content === 'string' ? this.tokenizer.encodeStable(p.content) : p.content;
      const found = cache.admit(tokens);
      this.counters.prefixCacheQueries += tokens.length;
      this.counters.prefixCacheHits += found.cachedTokens;
      uncached += tokens.length - found.cachedTokens;
      this.kvHub!.publish(found.events);
    }
    return this.config.ttftMs + uncached * perToken;
  }

  private generators(request: GenerationRequest): { gens: ChoiceGenerator[]; promptTokens: number; ttftMs: number } {
    const seed = request.seed ?? this.config.seed;
    const limit = this.config.maxModelLen;
    const gens: ChoiceGenerator[] = [];
    let promptTokens = 0;
    for (let p = 0; p < request.prompts.length; p++) {
      const prompt = request.prompts[p]!;
      promptTokens += prompt.promptTokens;
      const maxTokens =
        request.maxTokens ??
        (limit > 0 ? Math.min(DEFAULT_MAX_TOKENS, limit - prompt.promptTokens) : DEFAULT_MAX_TOKENS);
      for (let j = 0; j < request.n; j++) {
        gens.push(new ChoiceGenerator(p * request.n + j, mixSeed(prompt.hash, seed, j), maxTokens, request.stops));
      }
    }
    this.counters.promptTokens += promptTokens;
    return { gens, promptTokens, ttftMs: this.firstTokenMs(request.prompts) };
  }

  /** A non-streamed answer: generated at once, sent when the last token would have been. */
  private runWhole(job: Job, request: GenerationRequest, model: string): void {
    const { gens, promptTokens, ttftMs } = this.generators(request);
    const texts = gens.map((g) => g.rest());
    let completionTokens = 0;
    let longest = 0;
    for (const g of gens) {
      completionTokens += g.tokens;
      longest = Math.max(longest, g.tokens);
    }
    const chat = request.kind === 'chat';
    const send = () => {
      job.timer = null;
      if (job.state !== 'running') return;
      this.counters.generatedTokens += completionTokens;
      const choices = gens.map((g, i) =>
        chat
          ? `{"index":${g.index},"message":{"role":"assistant","content":${JSON.stringify(texts[i])}},"logprobs":null,"finish_reason":"${g.finishReason}"}`
          : `{"index":${g.index},"text":${JSON.stringify(texts[i])},"logprobs":null,"finish_reason":"${g.finishReason}"}`,
      );
      const body =
        `{"id":"${this.newId(chat ? 'chatcmpl-' : 'cmpl-')}","object":"${chat ? 'chat.completion' : 'text_completion'}",` +
        `"created":${Math.floor(Date.now() / 1000)},"model":${JSON.stringify(model)},"choices":[${choices.join(',')}],` +
        `"usage":{"prompt_tokens":${promptTokens},"completion_tokens":${completionTokens},"total_tokens":${promptTokens + completionTokens}}}`;
      sendJson(job.res, 200, body, this.closing);
    };
    const tps = this.config.tokensPerSecond;
    const delayMs = ttftMs + (tps > 0 && longest > 1 ? ((longest - 1) * 1000) / tps : 0);
    if (delayMs > 0) job.timer = setTimeout(send, delayMs);
    else send();
  }

  /**
   * A streamed answer, as OpenAI and vLLM send it: headers at once; at the
   * first token a role chunk (chat), then one chunk per token per choice, a
   * finish chunk per choice, the usage chunk if asked, and [DONE]. Token k is
   * due at ttft + k / rate after admission; a late timer sends all that are
   * due, so the rate holds whatever the timer granularity.
   */
  private runStream(job: Job, request: GenerationRequest, model: string): void {
    const res = job.res;
    const { gens, promptTokens, ttftMs } = this.generators(request);
    const chat = request.kind === 'chat';
    const usageNull = request.includeUsage ? ',"usage":null' : '';
    const opening =
      `data: {"id":"${this.newId(chat ? 'chatcmpl-' : 'cmpl-')}","object":"${chat ? 'chat.completion.chunk' : 'text_completion'}",` +
      `"created":${Math.floor(Date.now() / 1000)},"model":${JSON.stringify(model)},"choices":`;
    const head = `${opening}[{"index":`;
    const contentKey = chat ? ',"delta":{"content":' : ',"text":';
    const contentEnd = chat ? '},"logprobs":null,"finish_reason":null}]' : ',"logprobs":null,"finish_reason":null}]';
    const tail = `${contentEnd}${usageNull}}\n\n`;
    const singleNoStop = gens.length === 1 && !gens[0]!.hasStops;
    const firstOfOne = `${head}0${contentKey}`;
    const intervalMs = this.config.tokensPerSecond > 0 ? 1000 / this.config.tokensPerSecond : 0;
    const t0 = performance.now() + ttftMs;
    let steps = 0;
    let open = gens.length;
    const counters = this.counters;

    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      ...(this.closing ? { connection: 'close' } : {}),
    });
    res.flushHeaders();

    const roleChunk = (g: ChoiceGenerator) =>
      `${head}${g.index},"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]${usageNull}}\n\n`;
    const finishChunk = (g: ChoiceGenerator) =>
      `${head}${g.index}${chat ? ',"delta":{}' : ',"text":""'},"logprobs":null,"finish_reason":"${g.finishReason}"}]${usageNull}}\n\n`;

    const step = (): boolean => {
      let ok = true;
      if (steps === 0 && chat) for (const g of gens) ok = res.write(roleChunk(g));
      if (singleNoStop) {
        const g = gens[0]!;
        const first = g.tokens === 0;
        const word = g.nextWord();
        ok = res.write(`${firstOfOne}${first ? FIRST_TOKEN_JSON[word] : NEXT_TOKEN_JSON[word]}${tail}`);
        counters.generatedTokens++;
        if (g.finishReason !== null) {
          open--;
          ok = res.write(finishChunk(g));
        }
      } else {
        for (const g of gens) {
          if (g.finishReason !== null) continue;
          let piece: string;
          if (g.hasStops) piece = JSON.stringify(g.nextText());
          else {
            const first = g.tokens === 0;
            const word = g.nextWord();
            piece = first ? FIRST_TOKEN_JSON[word]! : NEXT_TOKEN_JSON[word]!;
          }
          counters.generatedTokens++;
          if (piece !== '""') ok = res.write(`${head}${g.index}${contentKey}${piece}${tail}`);
          if (g.finishReason !== null) {
            open--;
            ok = res.write(finishChunk(g));
          }
        }
      }
      steps++;
      return ok;
    };

    const finish = () => {
      let completionTokens = 0;
      for (const g of gens) completionTokens += g.tokens;
      if (request.includeUsage) {
        res.write(
          `${opening}[],"usage":{"prompt_tokens":${promptTokens},"completion_tokens":${completionTokens},"total_tokens":${promptTokens + completionTokens}}}\n\n`,
        );
      }
      res.end('data: [DONE]\n\n');
    };

    const tick = () => {
      job.timer = null;
      job.immediate = null;
      if (job.state !== 'running') return;
      let due: number;
      if (intervalMs > 0)
        due = Math.min(UNPACED_BATCH_STEPS, Math.floor((performance.now() - t0) / intervalMs) + 1 - steps);
      else due = UNPACED_BATCH_STEPS;
      res.cork();
      let ok = true;
      for (let k = 0; k < due && open > 0 && ok; k++) ok = step();
      if (open === 0) {
        finish();
        res.uncork();
        return;
      }
      res.uncork();
      if (!ok) res.once('drain', tick);
      else if (intervalMs === 0) job.immediate = setImmediate(tick);
      else job.timer = setTimeout(tick, Math.max(0, t0 + steps * intervalMs - performance.now()));
    };

    // Every choice may already be finished (no room left in the context): send the ends at once.
    for (const g of gens) if (g.finishReason !== null) open--;
    if (open === 0) {
      res.cork();
      if (chat) for (const g of gens) res.write(roleChunk(g));
      for (const g of gens) res.write(finishChunk(g));
      finish();
      res.uncork();
      return;
    }
    if (ttftMs > 0) job.timer = setTimeout(tick, ttftMs);
    else tick();
  }

  /**
   * A forced tool call, as vLLM sends one: a single call to `name` whose
   * arguments are made from the prompt (the same prompt, the same call), with
   * finish_reason "tool_calls", whole or streamed (the call's head, then its
   * arguments, then the finish chunk), after the time to first token.
   */
  private runToolCall(job: Job, request: GenerationRequest, name: string, model: string): void {
    const { promptTokens, ttftMs } = this.generators(request);
    const prompt = request.prompts[0]!;
    const args = JSON.stringify({ seed: prompt.hash % 1000 });
    const completionTokens = Math.max(1, Math.ceil(args.length / 4));
    const callId = this.newId('call_');
    const usage = `"usage":{"prompt_tokens":${promptTokens},"completion_tokens":${completionTokens},"total_tokens":${promptTokens + completionTokens}}`;
    const send = () => {
      job.timer = null;
      if (job.state !== 'running') return;
      this.counters.generatedTokens += completionTokens;
      const id = this.newId('chatcmpl-');
      const created = Math.floor(Date.now() / 1000);
      if (!request.stream) {
        const call = { id: callId, type: 'function', function: { name, arguments: args } };
        const body =
          `{"id":"${id}","object":"chat.completion","created":${created},"model":${JSON.stringify(model)},` +
          `"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[${JSON.stringify(call)}]},"logprobs":null,"finish_reason":"tool_calls"}],${usage}}`;
        sendJson(job.res, 200, body, this.closing);
        return;
      }
      const res = job.res;
      res.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache',
        ...(this.closing ? { connection: 'close' } : {}),
      });
      const chunk = (delta: unknown, finish: string | null) =>
        `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })}\n\n`;
      res.write(
        chunk({ role: 'assistant', content: null }, null) +
          chunk({ tool_calls: [{ index: 0, id: callId, type: 'function', function: { name, arguments: '' } }] }, null) +
          chunk({ tool_calls: [{ index: 0, function: { arguments: args } }] }, null) +
          chunk({}, 'tool_calls') +
          (request.includeUsage
            ? `data: {"id":"${id}","object":"chat.completion.chunk","created":${created},"model":${JSON.stringify(model)},"choices":[],${usage}}\n\n`
            : ''),
      );
      res.end('data: [DONE]\n\n');
    };
    if (ttftMs > 0) job.timer = setTimeout(send, ttftMs);
    else send();
  }

  /**
   * POST /v1/responses, as vLLM serves the Responses API: one output item
   * (a message of generated words, or the forced function call made as
   * runToolCall makes it), whole or as the event stream OpenAI's clients
   * parse (created, in_progress, the item and its part opened, a delta per
   * token paced as chat streams are, the dones, then completed or, when
   * max_output_tokens cut it, incomplete), each event numbered from 0.
   */
  private runResponses(job: Job, request: ResponsesRequest, model: string): void {
    const res = job.res;
    const gen = request.generation;
    const { gens, promptTokens, ttftMs } = this.generators(gen);
    const g = gens[0]!;
    const id = this.newId('resp_');
    const createdAtS = Math.floor(Date.now() / 1000);
    const itemId = this.newId(gen.toolCall === null ? 'msg_' : 'fc_');
    const callId = this.newId('call_');
    const args = JSON.stringify({ seed: gen.prompts[0]!.hash % 1000 });
    let seq = 0;
    const event = (type: string, fields: Record<string, unknown>) => responsesEvent(type, seq++, fields);
    const status = (): 'completed' | 'incomplete' =>
      request.maxOutputTokens !== null && g.tokens >= request.maxOutputTokens ? 'incomplete' : 'completed';
    const messageItem = (text: string, done: boolean) => ({
      id: itemId,
      type: 'message',
      status: done ? 'completed' : 'in_progress',
      role: 'assistant',
      content: done ? [{ type: 'output_text', text, annotations: [], logprobs: [] }] : [],
    });
    const callItem = (done: boolean) => ({
      id: itemId,
      type: 'function_call',
      status: done ? 'completed' : 'in_progress',
      call_id: callId,
      name: gen.toolCall,
      arguments: done ? args : '',
    });
    const final = (output: unknown[], completionTokens: number) =>
      responseObject(id, model, createdAtS, request, gen.toolCall === null ? status() : 'completed', output, {
        input: promptTokens,
        output: completionTokens,
      });
    const callTokens = Math.max(1, Math.ceil(args.length / 4));

    if (!gen.stream) {
      const text = gen.toolCall === null ? g.rest() : '';
      const completionTokens = gen.toolCall === null ? g.tokens : callTokens;
      const send = () => {
        job.timer = null;
        if (job.state !== 'running') return;
        this.counters.generatedTokens += completionTokens;
        const output = gen.toolCall === null ? [messageItem(text, true)] : [callItem(true)];
        sendJson(res, 200, JSON.stringify(final(output, completionTokens)), this.closing);
      };
      const tps = this.config.tokensPerSecond;
      const delayMs = ttftMs + (tps > 0 && completionTokens > 1 ? ((completionTokens - 1) * 1000) / tps : 0);
      if (delayMs > 0) job.timer = setTimeout(send, delayMs);
      else send();
      return;
    }

    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      ...(this.closing ? { connection: 'close' } : {}),
    });
    res.flushHeaders();
    const opening = () =>
      event('response.created', { response: responseObject(id, model, createdAtS, request, 'in_progress', [], null) }) +
      event('response.in_progress', {
        response: responseObject(id, model, createdAtS, request, 'in_progress', [], null),
      });
    if (gen.toolCall !== null) {
      const send = () => {
        job.timer = null;
        if (job.state !== 'running') return;
        this.counters.generatedTokens += callTokens;
        res.end(
          opening() +
            event('response.output_item.added', { output_index: 0, item: callItem(false) }) +
            event('response.function_call_arguments.delta', { item_id: itemId, output_index: 0, delta: args }) +
            event('response.function_call_arguments.done', {
              item_id: itemId,
              output_index: 0,
              name: gen.toolCall,
              arguments: args,
            }) +
            event('response.output_item.done', { output_index: 0, item: callItem(true) }) +
            event('response.completed', { response: final([callItem(true)], callTokens) }),
        );
      };
      if (ttftMs > 0) job.timer = setTimeout(send, ttftMs);
      else send();
      return;
    }

    const part = { item_id: itemId, output_index: 0, content_index: 0 };
    let text = '';
    const intervalMs = this.config.tokensPerSecond > 0 ? 1000 / this.config.tokensPerSecond : 0;
    const t0 = performance.now() + ttftMs;
    let steps = 0;
    const tick = () => {
      job.timer = null;
      job.immediate = null;
      if (job.state !== 'running') return;
      let out =
        steps === 0
          ? opening() +
            event('response.output_item.added', { output_index: 0, item: messageItem('', false) }) +
            event('response.content_part.added', {
              ...part,
              part: { type: 'output_text', text: '', annotations: [], logprobs: [] },
            })
          : '';
      const due =
        intervalMs > 0
          ? Math.min(UNPACED_BATCH_STEPS, Math.floor((performance.now() - t0) / intervalMs) + 1 - steps)
          : UNPACED_BATCH_STEPS;
      for (let k = 0; k < due && g.finishReason === null; k++) {
        const first = g.tokens === 0;
        const word = VOCABULARY[g.nextWord()]!;
        const delta = first ? word : ` ${word}`;
        text += delta;
        this.counters.generatedTokens++;
        steps++;
        out += event('response.output_text.delta', { ...part, delta, logprobs: [] });
      }
      if (g.finishReason !== null) {
        const done = messageItem(text, true);
        res.end(
          out +
            event('response.output_text.done', { ...part, text, logprobs: [] }) +
            event('response.content_part.done', { ...part, part: done.content[0] }) +
            event('response.output_item.done', { output_index: 0, item: done }) +
            event(status() === 'completed' ? 'response.completed' : 'response.incomplete', {
              response: final([done], g.tokens),
            }),
        );
        return;
      }
      const ok = res.write(out);
      if (!ok) res.once('drain', tick);
      else if (intervalMs === 0) job.immediate = setImmediate(tick);
      else job.timer = setTimeout(tick, Math.max(0, t0 + steps * intervalMs - performance.now()));
    };
    if (ttftMs > 0) job.timer = setTimeout(tick, ttftMs);
    else tick();
  }

  private runEmbedding(job: Job, request: EmbeddingRequest, model: string): void {
    const dims = request.dimensions ?? this.config.embeddingDim;
    let promptTokens = 0;
    for (const input of request.inputs) promptTokens += input.promptTokens;
    this.counters.promptTokens += promptTokens;
    const send = () => {
      job.timer = null;
      if (job.state !== 'running') return;
      const data = request.inputs.map((input, i) => {
        const vector = embeddingOf(input.hash, this.config.seed, dims);
        const encoded =
          request.encoding === 'base64'
            ? `"${Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength).toString('base64')}"`
            : `[${Array.prototype.join.call(vector, ',')}]`;
        return `{"object":"embedding","index":${i},"embedding":${encoded}}`;
      });
      const body =
        `{"id":"${this.newId('embd-')}","object":"list","created":${Math.floor(Date.now() / 1000)},"model":${JSON.stringify(model)},` +
        `"data":[${data.join(',')}],"usage":{"prompt_tokens":${promptTokens},"total_tokens":${promptTokens}}}`;
      sendJson(job.res, 200, body, this.closing);
    };
    if (this.config.ttftMs > 0) job.timer = setTimeout(send, this.config.ttftMs);
    else send();
  }
}

function sendJson(
  res: ServerResponse,
  status: number,
  body: string,
  closeConnection: boolean,
  extra?: Record<string, string>,
): void {
  if (res.headersSent || res.writableEnded) return;
  res.writeHead(status, {
    ...JSON_HEADERS,
    'content-length': Buffer.byteLength(body),
    ...(closeConnection ? { connection: 'close' } : {}),
    ...extra,
  });
  res.end(body);
}

/** OpenAI's error shape with vLLM's values: `type` an exception name, `code` the HTTP status. */
function sendError(
  res: ServerResponse,
  status: number,
  type: string,
  message: string,
  param: string | null,
  closeConnection: boolean,
  extra?: Record<string, string>,
): void {
  const body = `{"error":{"message":${JSON.stringify(message)},"type":"${type}","param":${param === null ? 'null' : JSON.stringify(param)},"code":${status}}}`;
  sendJson(res, status, body, closeConnection, extra);
}
