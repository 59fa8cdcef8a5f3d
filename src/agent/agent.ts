// The node agent: joins a control plane, reports this machine with every
// heartbeat, and converges on the shards the answer names. One heartbeat
// loop does both reporting and receiving work, long-polled, so the report is
// never older than the interval and an admin action arrives within a second.
// Everything the loop touches is injected (prober, HTTP, clock), so a
// benchmark can run thousands of simulated agents in one process.
import { isWildcardHost } from '../net/index.js';
import { resolve } from 'node:path';
import type { FastifyInstance } from 'fastify';
import pino, { type Logger } from 'pino';
import type { Dispatcher } from 'undici';
import { z } from 'zod';
import { LlmgwError, ValidationError } from '../errors/index.js';
import {
  AGENT_API_PREFIX,
  type HeartbeatRequest,
  HeartbeatResponseSchema,
  JoinResponseSchema,
  type NodeReport,
  plainName,
  PROTOCOL_VERSION,
  type ShardAssignment,
  type ShardStatus,
} from '../protocol/index.js';
import { certificateProblem, isPlainHttpOffLoopback, readCa, readServerTls, type ServerTls } from '../tls/index.js';
import { parseOptions } from '../validation/options.js';
import { timerFlagMs } from '../validation/durations.js';
import { LLMGW_VERSION } from '../version.js';
import { defaultNodeId, type Identity, loadIdentity, saveIdentity } from './identity.js';
import { openFileLimit } from '../http/index.js';
import {
  ControlClient,
  heartbeatDeadlineMs,
  joinDeadlineMs,
  linkDeadlineAt,
  type LinkTiming,
  pollWaitMs,
  retryDelayMs,
} from './control-link.js';
import { backoffDelayMs, firstJoinDelayMs, startIndex } from './backoff.js';
import { ReportPolicy } from './report-policy.js';
import { createMgmtApp } from './mgmt-app.js';
import { AGENT_DEFAULTS } from './defaults/index.js';

/** The options as an operator writes them (flags). */
export interface AgentOptions {
  /** One or more control-plane agent URLs; the agent fails over between them in order. */
  control: string[];
  joinToken?: string;
  /** Absent: derived from /etc/machine-id and the hostname. */
  nodeId?: string;
  labels?: Record<string, string>;
  /** Where the agent keeps its credential and engine records. */
  stateDir: string;
  /** host:port for the management API (collect, logs); absent = AGENT_DEFAULTS.mgmtAddr (loopback, a free port). */
  mgmtAddr?: string;
  /** How often to report when the control plane does not say; a duration like "5s". Absent = AGENT_DEFAULTS.heartbeatIntervalMs. */
  heartbeatInterval?: string;
  /**
   * How long past its long-poll wait a control plane may take to answer (and
   * how long a join may take) before the agent gives up on it and tries the
   * next; a duration like "2s". Absent: derived from the stale window the
   * control plane announces, so a cut link is noticed while the node is still
   * up (joins: 10s).
   */
  controlDeadline?: string;
  /** PEM CA file the control plane's certificate must chain to; absent = the system's CAs. */
  ca?: string;
  /** True: allow http:// to a control plane on another machine (the join token then crosses the network in clear). */
  insecureHttp?: boolean;
  /** PEM certificate and key the management API serves TLS with; absent = plain HTTP. */
  tlsCert?: string;
  tlsKey?: string;
  /**
   * True: engines serve https with tlsCert/tlsKey (the node certificate), and
   * the agent's probes verify them against `ca`. Needs tlsCert and tlsKey.
   * Absent = engines serve plain http.
   */
  engineTls?: boolean;
}

const AgentOptionsSchema = z.strictObject({
  control: z.array(z.string().url('want a URL like http://10.0.0.1:8082')).min(1, 'give at least one --control URL'),
  joinToken: z.string().min(1).optional(),
  nodeId: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, 'want 1-128 letters, digits, ".", "_" or "-"')
    .optional(),
  // Refused here, at start, rather than by the control plane at every join.
  labels: z.record(plainName('label key', 128), plainName('label value', 256)).default({}),
  stateDir: z.string().min(1),
  mgmtAddr: z
    .string()
    .regex(/^[^:]+:\d+$|^\[[0-9a-fA-F:]+\]:\d+$/, 'want host:port')
    .default(AGENT_DEFAULTS.mgmtAddr),
  heartbeatInterval: z.string().optional(),
  controlDeadline: z.string().optional(),
  ca: z.string().min(1).optional(),
  insecureHttp: z.boolean().default(false),
  tlsCert: z.string().min(1).optional(),
  tlsKey: z.string().min(1).optional(),
  engineTls: z.boolean().default(false),
});

export interface AgentConfig {
  readonly controlUrls: readonly string[];
  readonly joinToken: string | null;
  readonly nodeId: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly stateDir: string;
  readonly mgmtHost: string;
  readonly mgmtPort: number;
  readonly heartbeatIntervalMs: number;
  /** The operator's --control-deadline, ms; null = derived from the announced stale window (see control-link.ts). */
  readonly controlDeadlineMs: number | null;
  /** The CA the control plane is verified with; null = the system's CAs. */
  readonly ca: Buffer | null;
  /** The management API's certificate and key; null = plain HTTP. */
  readonly mgmtTls: ServerTls | null;
  /** The files engines serve https with (absolute paths: engines may run elsewhere); null = plain http. */
  readonly engineTls: { readonly certFile: string; readonly keyFile: string } | null;
}

export function compileAgentOptions(options: AgentOptions): AgentConfig {
  const o = parseOptions(AgentOptionsSchema, options, 'the agent options are not valid');
  const interval =
    o.heartbeatInterval === undefined
      ? AGENT_DEFAULTS.heartbeatIntervalMs
      : timerFlagMs('--heartbeat-interval', o.heartbeatInterval, 'heartbeat interval');
  const deadline = o.controlDeadline === undefined ? null : timerFlagMs('--control-deadline', o.controlDeadline);
  if (deadline === 0)
    throw new LlmgwError(
      'LLMGW_CONFIG_INVALID',
      `--control-deadline ${o.controlDeadline} would give up on every call at once; give a duration like 2s, or leave it out to derive it from the stale window`,
    );
  const at = o.mgmtAddr.lastIndexOf(':');
  checkControlTransport(o.control, o.ca, o.insecureHttp);
  if (o.engineTls && (!o.tlsCert || !o.tlsKey)) {
    throw new LlmgwError(
      'LLMGW_CONFIG_INVALID',
      '--engine-tls serves engines with the node certificate, so it needs --tls-cert and --tls-key (the node-NAME.pem and node-NAME-key.pem `llmgw tls init` wrote)',
    );
  }
  return Object.freeze({
    ca: o.ca ? readCa(o.ca, '--ca') : null,
    mgmtTls: readServerTls(o.tlsCert, o.tlsKey, { cert: '--tls-cert', key: '--tls-key' }),
    engineTls:
      o.engineTls && o.tlsCert && o.tlsKey
        ? Object.freeze({ certFile: resolve(o.tlsCert), keyFile: resolve(o.tlsKey) })
        : null,
    controlUrls: o.control.map((u) => u.replace(/\/+$/, '')),
    joinToken: o.joinToken ?? null,
    nodeId: o.nodeId ?? defaultNodeId(),
    labels: o.labels,
    stateDir: o.stateDir,
    mgmtHost: o.mgmtAddr.slice(0, at).replace(/^\[|\]$/g, ''),
    mgmtPort: Number(o.mgmtAddr.slice(at + 1)),
    heartbeatIntervalMs: interval,
    controlDeadlineMs: deadline,
  });
}

/**
 * The join token and the node credential travel on every control URL, so a
 * plain-http URL to another machine is refused unless the operator says the
 * network is trusted; a --ca beside an http URL would verify nothing, which
 * is a mistake worth stopping on too.
 */
function checkControlTransport(urls: readonly string[], ca: string | undefined, insecureHttp: boolean): void {
  const problems: string[] = [];
  for (const url of urls) {
    if (ca && new URL(url).protocol === 'http:') {
      problems.push(
        `--ca is given but --control ${url} is plain http, so there is no certificate to verify; use https://`,
      );
    } else if (!insecureHttp && isPlainHttpOffLoopback(url)) {
      problems.push(
        `--control ${url} is plain http to another machine: the join token and this node's credential would cross the network in clear. ` +
          'Serve the control plane with tls_cert/tls_key and use https:// (with --ca for a private CA), or pass --insecure-http on a network you trust',
      );
    }
  }
  if (problems.length) throw new ValidationError('LLMGW_CONFIG_INVALID', problems, 'the agent options are not valid');
}

/** What runs the node's shards; the agent hands it each answer's assignments. Absent: assignments are only recorded. */
export interface ShardRunner {
  desired(shards: readonly ShardAssignment[]): void | Promise<void>;
  status(): ShardStatus[];
}

export interface AgentDeps {
  probe: () => Promise<NodeReport>;
  logger?: Logger;
  runner?: ShardRunner;
  /** When false, no management listener is started (simulated fleets in benchmarks). Default true. */
  mgmt?: boolean;
  /** Adds routes to the management API (weights removal, logs); every route is behind the control plane's token. */
  mgmtRoutes?: (app: FastifyInstance) => void;
  /** The HTTP client for the control plane; absent = its own (control-link.ts: keep-alive, connect timeout, trusting config.ca or the system's CAs). */
  dispatcher?: Dispatcher;
  /** The host the management address names when the listener binds a wildcard (see src/agent/address); absent = the bind host. */
  advertiseHost?: string;
  /** Parts that run alongside the heartbeat (the load scraper): started once the node has joined, stopped with the agent. Absent = none. */
  companions?: readonly { start(): void; stop(): Promise<void> }[];
  /** A fresh agent waits a random part of this before its first join, so a fleet started at once does not stampede; absent or 0 = joins at once. */
  firstJoinSpreadMs?: number;
  /** Draws in [0, 1) for jitter; absent = Math.random. */
  random?: () => number;
}

export type AgentPhase = 'joining' | 'running' | 'stopped';

export class Agent {
  private identity: Identity | null = null;
  private generation: number | undefined;
  private controlIndex = 0;
  private stopped = false;
  private loop: Promise<void> | null = null;
  private abort = new AbortController();
  /** Aborts the heartbeat waiting in a long-poll, so news (a shard became ready) is reported now. */
  private pollAbort: AbortController | null = null;
  private poked = false;
  private mgmtApp: FastifyInstance | null = null;
  private lastReport: { at: number; report: NodeReport } | null = null;
  private intervalMs: number;
  /** node_stale_after as the control plane announced it, ms; null = not announced. */
  private staleAfterMs: number | null = null;
  /** When the current control plane must answer by (ms since the epoch), while a heartbeat to it is unanswered; null = none pending. */
  private answerDueAt: number | null = null;
  private readonly link: ControlClient;
  /** Whether a heartbeat carries the full report or only its hash. */
  private readonly reports = new ReportPolicy();
  private readonly random: () => number;
  readonly logger: Logger;
  /** The assignments of the newest answer; the runner converges on them. */
  assignments: ShardAssignment[] = [];
  mgmtUrl: string | null = null;
  phase: AgentPhase = 'joining';
  /** Count of heartbeats answered, for tests and the benchmark. */
  heartbeats = 0;
  /** Count of calls given up on at their deadline (a cut link, a paused control plane), for tests and the benchmark. */
  unanswered = 0;

  constructor(
    readonly config: AgentConfig,
    private readonly deps: AgentDeps,
  ) {
    this.logger = deps.logger ?? pino({ base: { part: 'agent', node: config.nodeId } });
    this.intervalMs = config.heartbeatIntervalMs;
    this.link = new ControlClient({
      ca: config.ca,
      connectTimeoutMs: joinDeadlineMs({ deadlineMs: config.controlDeadlineMs }),
      dispatcher: deps.dispatcher,
    });
    this.random = deps.random ?? Math.random;
    // Many nodes given the same URLs spread over them instead of all starting at the first.
    this.controlIndex = startIndex(config.nodeId, config.controlUrls.length);
  }

  get nodeId(): string {
    return this.config.nodeId;
  }

  /** Starts the management listener and the heartbeat loop; resolves once the node has joined. */
  async start(): Promise<void> {
    if (this.deps.mgmt !== false) await this.startMgmt();
    const saved = loadIdentity(this.config.stateDir);
    if (saved && saved.node_id === this.config.nodeId) this.identity = saved;
    if (!this.identity) {
      await sleep(firstJoinDelayMs(this.deps.firstJoinSpreadMs ?? 0, this.random()), this.abort.signal);
      await this.joinWithRetry();
    }
    this.phase = 'running';
    this.loop = this.heartbeatLoop();
    for (const c of this.deps.companions ?? []) c.start();
  }

  /** Stops reporting and the management listener. Engines are not touched: that is the runner's `detach`. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    await Promise.all((this.deps.companions ?? []).map((c) => c.stop().catch(() => {})));
    await this.loop?.catch(() => {});
    await this.mgmtApp?.close();
    await this.link.close();
    this.phase = 'stopped';
  }

  /** Reports now instead of at the end of the current long-poll. */
  poke(): void {
    this.poked = true;
    this.pollAbort?.abort();
  }

  /** What the call deadlines are derived from, as the control plane last announced it. */
  private timing(): LinkTiming {
    return { staleAfterMs: this.staleAfterMs, intervalMs: this.intervalMs, deadlineMs: this.config.controlDeadlineMs };
  }

  private controlUrl(): string {
    return this.config.controlUrls[this.controlIndex % this.config.controlUrls.length]!;
  }

  private failover(): void {
    this.answerDueAt = null;
    this.controlIndex = (this.controlIndex + 1) % this.config.controlUrls.length;
  }

  private async joinWithRetry(): Promise<void> {
    let attempt = 0;
    for (;;) {
      try {
        await this.join();
        return;
      } catch (err) {
        if (err instanceof LlmgwError && err.code === 'LLMGW_JOIN_REFUSED') throw err;
        if (this.stopped) throw err;
        // Nothing was sent when TLS verification failed: say so, and what to fix, since retrying will not.
        const hint = certificateProblem(err, '--ca');
        if (err instanceof LlmgwError && err.code === 'LLMGW_NODE_ID_TAKEN') {
          // Not final: the node holding the id may be lost or removed later, or an admin may hand out a
          // per-node token. Said at every try, so whoever reads the log sees why this node is not up.
          this.logger.warn(
            { control: this.controlUrl(), err: err.message },
            'join refused: the node id belongs to a live node; retrying',
          );
        } else {
          this.logger.warn(
            { control: this.controlUrl(), err: (err as Error).message, ...(hint ? { hint } : {}) },
            'cannot join yet; retrying',
          );
        }
        this.failover();
        // Jittered: after a control-plane restart the whole fleet joins again, and must not do it in step.
        await sleep(
          backoffDelayMs(++attempt, { baseMs: 250, capMs: this.intervalMs }, this.random()),
          this.abort.signal,
        );
      }
    }
  }

  private async join(): Promise<void> {
    if (!this.config.joinToken) {
      throw new LlmgwError(
        'LLMGW_JOIN_REFUSED',
        `node ${this.config.nodeId} has no saved credential and no join token; start the agent with --join-token-file FILE (or LLMGW_JOIN_TOKEN)`,
      );
    }
    const report = await this.report(true);
    const res = await this.link.call(`${this.controlUrl()}${AGENT_API_PREFIX}/join`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        join_token: this.config.joinToken,
        node_id: this.config.nodeId,
        hostname: report.hostname,
        agent_version: LLMGW_VERSION,
        protocol_version: PROTOCOL_VERSION,
        labels: this.config.labels,
        ...(this.mgmtUrl ? { mgmt_addr: new URL(this.mgmtUrl).host } : {}),
        // The control plane checks mgmt_addr against these (and the address this join comes from).
        ...(report.engine_host !== undefined ? { engine_host: report.engine_host } : {}),
        ...(report.port_range !== undefined ? { port_range: report.port_range } : {}),
        // Proof that this is the node that holds the id: the control plane gives a live node's id to no one else.
        ...(this.identity ? { credential: this.identity.credential } : {}),
      }),
      signal: this.abort.signal,
      deadlineMs: joinDeadlineMs(this.timing()),
    });
    const text = res.text;
    if (res.statusCode === 401) {
      throw new LlmgwError(
        'LLMGW_JOIN_REFUSED',
        `the control plane at ${this.controlUrl()} refused the join: ${errorText(text)}`,
      );
    }
    if (res.statusCode === 409) throw new LlmgwError('LLMGW_NODE_ID_TAKEN', errorText(text));
    if (res.statusCode !== 200)
      throw new LlmgwError('LLMGW_UPSTREAM', `join answered ${res.statusCode}: ${errorText(text)}`);
    const answer = JoinResponseSchema.parse(JSON.parse(text));
    this.identity = {
      node_id: answer.node_id,
      credential: answer.credential,
      mgmt_token: answer.mgmt_token,
      control: this.controlUrl(),
    };
    if (answer.heartbeat_interval_ms) this.intervalMs = answer.heartbeat_interval_ms;
    if (answer.node_stale_after_ms) this.staleAfterMs = answer.node_stale_after_ms;
    saveIdentity(this.config.stateDir, this.identity);
    this.generation = undefined;
    this.reports.reset();
    this.logger.info({ control: this.controlUrl() }, 'joined');
  }

  /** The probe's report, reused while fresh: a long-poll answered early must not cost a full probe. */
  private async report(force = false): Promise<NodeReport> {
    const now = Date.now();
    if (!force && this.lastReport && now - this.lastReport.at < this.intervalMs * 0.8) return this.lastReport.report;
    const report = await this.deps.probe();
    this.lastReport = { at: now, report };
    return report;
  }

  private async heartbeatLoop(): Promise<void> {
    let failures = 0;
    while (!this.stopped) {
      try {
        await this.heartbeatOnce(pollWaitMs(this.timing()));
        failures = 0;
      } catch (err) {
        if (this.stopped) return;
        if (this.poked) {
          // Cut short by news, not by the link. The flag stays set so the next heartbeat carries the
          // news unheld and is answered at once; the unanswered call's deadline carries over to it,
          // so a silent link is still noticed however often the agent is poked, and a healthy one,
          // answering at once, never reaches that deadline.
          continue;
        }
        this.answerDueAt = null;
        failures++;
        if (err instanceof LlmgwError && err.code === 'LLMGW_JOIN_REFUSED' && this.config.joinToken) {
          // The identity is kept until the new one arrives: its credential is the proof that lets this
          // node have its id back while the control plane still counts it live.
          this.logger.warn('the control plane no longer knows this node; joining again');
          try {
            await this.joinWithRetry();
          } catch (e) {
            this.logger.error({ err: (e as Error).message }, 'rejoin failed');
            await sleep(this.intervalMs, this.abort.signal);
          }
          continue;
        }
        const unanswered = err instanceof LlmgwError && err.code === 'LLMGW_CONTROL_UNANSWERED';
        if (unanswered) this.unanswered++;
        const from = this.controlUrl();
        if (this.config.controlUrls.length > 1) this.failover();
        this.logger.warn(
          {
            control: from,
            next: this.controlUrl(),
            err: (err as Error).message,
            failures,
            ...(unanswered ? { code: 'LLMGW_CONTROL_UNANSWERED' } : {}),
          },
          unanswered ? 'control plane did not answer in time; trying the next' : 'heartbeat failed',
        );
        await sleep(
          retryDelayMs(failures, this.config.controlUrls.length, this.intervalMs, this.random()),
          this.abort.signal,
        );
      }
    }
  }

  /** One heartbeat: report, then wait (long-poll) for the answer, then hand the assignments to the runner. */
  async heartbeatOnce(waitMs: number): Promise<void> {
    if (!this.identity) throw new LlmgwError('LLMGW_JOIN_REFUSED', 'not joined');
    const poked = this.poked;
    this.poked = false;
    // The full report only when the control plane does not hold this one already.
    const reportFields = this.reports.fields(await this.report(), Date.now());
    const body: HeartbeatRequest = {
      node_id: this.config.nodeId,
      agent_version: LLMGW_VERSION,
      protocol_version: PROTOCOL_VERSION,
      ...reportFields,
      shards: this.deps.runner?.status() ?? [],
      // A poked heartbeat carries news: answer at once rather than hold it.
      ...(this.generation !== undefined && !poked ? { known_generation: this.generation, wait_ms: waitMs } : {}),
    };
    this.pollAbort = new AbortController();
    const now = Date.now();
    // The answer may be held for wait_ms; past that, silence means the link is cut, and the node must reach another control plane before it goes stale.
    this.answerDueAt = linkDeadlineAt(now, heartbeatDeadlineMs(body.wait_ms ?? 0, this.timing()), this.answerDueAt);
    const res = await this.link.call(`${this.controlUrl()}${AGENT_API_PREFIX}/heartbeat`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${this.identity.credential}` },
      body: JSON.stringify(body),
      signal: AbortSignal.any([this.abort.signal, this.pollAbort.signal]),
      deadlineMs: Math.max(1, this.answerDueAt - now),
    });
    const text = res.text;
    // Any answer, even a refusal, shows the link carries packets.
    this.answerDueAt = null;
    if (res.statusCode === 401) throw new LlmgwError('LLMGW_JOIN_REFUSED', errorText(text));
    if (res.statusCode !== 200)
      throw new LlmgwError('LLMGW_UPSTREAM', `heartbeat answered ${res.statusCode}: ${errorText(text)}`);
    const answer = HeartbeatResponseSchema.parse(JSON.parse(text));
    this.heartbeats++;
    if (answer.heartbeat_interval_ms) this.intervalMs = answer.heartbeat_interval_ms;
    if (answer.node_stale_after_ms) this.staleAfterMs = answer.node_stale_after_ms;
    this.generation = answer.generation;
    this.reports.answered(reportFields, answer, Date.now());
    if (answer.mgmt_token !== undefined && answer.mgmt_token !== this.identity.mgmt_token) {
      // The control plane issued a new management token (its join token was rotated, or the node's
      // record came from a store that held only a hash): the old one no longer opens anything.
      this.identity = { ...this.identity, mgmt_token: answer.mgmt_token };
      saveIdentity(this.config.stateDir, this.identity);
      this.logger.info('the control plane issued a new management token');
    }
    this.assignments = answer.shards;
    await this.deps.runner?.desired(answer.shards);
  }

  private async startMgmt(): Promise<void> {
    const tls = this.config.mgmtTls;
    const app = createMgmtApp({
      logger: this.logger.child({ listener: 'mgmt' }),
      tls,
      token: () => this.identity?.mgmt_token,
      openFiles: openFileLimit(),
    });
    app.get('/mgmt/v1/health', async () => ({ node_id: this.config.nodeId, phase: this.phase }));
    this.deps.mgmtRoutes?.(app);
    await app.listen({ host: this.config.mgmtHost, port: this.config.mgmtPort });
    const address = app.server.address();
    const port = typeof address === 'object' && address ? address.port : this.config.mgmtPort;
    // A wildcard bind is reached at the node's advertised address: the control plane accepts no other.
    const reached =
      isWildcardHost(this.config.mgmtHost) && this.deps.advertiseHost ? this.deps.advertiseHost : this.config.mgmtHost;
    const host = reached.includes(':') ? `[${reached}]` : reached;
    this.mgmtUrl = `${tls ? 'https' : 'http'}://${host}:${port}`;
    this.mgmtApp = app;
  }
}

function errorText(body: string): string {
  try {
    const parsed = JSON.parse(body) as { error?: unknown };
    if (typeof parsed.error === 'string') return parsed.error;
  } catch {
    // Not JSON: the raw text, bounded, says more than nothing.
  }
  return body.slice(0, 300);
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
