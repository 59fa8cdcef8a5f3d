// How the agent reaches its control planes: the deadline every call gets, the
// HTTP client the calls are made with, and how long to wait before the next
// try. Kept apart from the heartbeat loop (agent.ts) because it is transport,
// not protocol. A control plane that stops answering without closing the
// connection (packets dropped by a dead switch port or a firewall, a paused
// VM, a cable pulled on the far side) gives no error at all: TCP retransmits
// for minutes and the socket never fails. The only way to notice in time is to
// stop waiting, so every call has an application deadline that ends well
// inside the stale window, and the agent then tries the next control plane
// while the node is still counted up. The deadlines are pure functions of what
// the control plane announced, so they are unit-tested without a network.
import { Agent, type Dispatcher, request } from 'undici';
import { LlmgwError } from '../errors/index.js';
import { controlPlaneConnect } from '../tls/index.js';
import { backoffDelayMs } from './backoff.js';

/** How long a join may take, and a connect, when the operator gives no --control-deadline: joins are not racing a stale window. */
export const DEFAULT_JOIN_DEADLINE_MS = 10_000;
/** The least time past the poll wait an answer gets: below it a healthy control plane's GC pause or fsync would count as a cut link. */
export const MIN_ANSWER_SLACK_MS = 250;
/** The most: a link silent this long is cut, however long the stale window. */
export const MAX_ANSWER_SLACK_MS = 10_000;
/** Idle time before the kernel's first TCP keep-alive probe on a control-plane connection. */
export const KEEPALIVE_INITIAL_DELAY_MS = 5_000;

/** What the deadlines are derived from. */
export interface LinkTiming {
  /** The stale window (node_stale_after) the control plane announced, ms; null = not announced (an older control plane). */
  staleAfterMs: number | null;
  /** The heartbeat interval in force (announced, else --heartbeat-interval), ms. */
  intervalMs: number;
  /** The operator's --control-deadline, ms: used as it is; null = derived from the stale window. */
  deadlineMs: number | null;
}

/**
 * The stale window the agent works to: the announced one, else three
 * intervals, which is how a control plane picks its interval when not told
 * (a third of node_stale_after), so the guess is right for every default.
 */
export function staleWindowMs(t: LinkTiming): number {
  return t.staleAfterMs ?? t.intervalMs * 3;
}

/**
 * How long the agent asks a control plane to hold a heartbeat (long-poll):
 * the interval, but at most a third of the stale window, because the node's
 * last-seen time is when a heartbeat arrives, and wait plus answer plus a
 * failover must all fit in the window.
 */
export function pollWaitMs(t: LinkTiming): number {
  return Math.max(1, Math.min(t.intervalMs, Math.floor(staleWindowMs(t) / 3)));
}

/**
 * How long past the poll wait an answer may take before the control plane
 * counts as unreachable: the operator's deadline, else half of what the wait
 * leaves of the stale window (the other half is for reaching the next
 * control plane before the node goes stale), within 250 ms-10 s.
 */
export function answerSlackMs(waitMs: number, t: LinkTiming): number {
  if (t.deadlineMs !== null) return t.deadlineMs;
  const left = staleWindowMs(t) - waitMs;
  return Math.min(MAX_ANSWER_SLACK_MS, Math.max(MIN_ANSWER_SLACK_MS, Math.floor(left / 2)));
}

/** The whole time a heartbeat that asks for `waitMs` of long-poll may take, connect to last byte. */
export function heartbeatDeadlineMs(waitMs: number, t: LinkTiming): number {
  return waitMs + answerSlackMs(waitMs, t);
}

/**
 * When the control plane must have answered, as a wall-clock ms: the
 * deadline of the oldest call to it still unanswered (`carriedAt`), or this
 * call's own (`now + ownMs`), whichever is sooner. A call cut short by news
 * (a poke) leaves its deadline to the next one: otherwise an agent whose
 * engines change often would start a fresh deadline every few seconds, and
 * a silent link would never be noticed. Null `carriedAt` = nothing pending.
 */
export function linkDeadlineAt(now: number, ownMs: number, carriedAt: number | null): number {
  return carriedAt === null ? now + ownMs : Math.min(carriedAt, now + ownMs);
}

/** The whole time a join may take: the operator's deadline, else 10 s. */
export function joinDeadlineMs(t: Pick<LinkTiming, 'deadlineMs'>): number {
  return t.deadlineMs ?? DEFAULT_JOIN_DEADLINE_MS;
}

/**
 * The pause before the next heartbeat after `failures` in a row, over
 * `controls` control planes: none while there is one not yet tried in this
 * run of failures (moving on is the point of having several), then a
 * jittered back-off (`random` in [0, 1)) doubling from 250 ms, never longer
 * than an interval so a healed link is found soon. The jitter keeps a fleet
 * that lost its control plane together from retrying in step.
 */
export function retryDelayMs(failures: number, controls: number, intervalMs: number, random: number): number {
  const beyond = failures - Math.max(1, controls);
  if (beyond < 0) return 0;
  return backoffDelayMs(beyond + 1, { baseMs: 250, capMs: intervalMs }, random);
}

/**
 * The HTTP client for control-plane calls: its own connection pool, TCP
 * keep-alive (a backstop for an idle pooled connection whose peer vanished;
 * the kernel's probe interval makes it slow, so the call deadline is what
 * catches a cut link in time), a connect timeout (a SYN into a dropped link
 * is otherwise retried for about two minutes), and `ca` to verify against
 * when the control plane has a private CA (null = the system's CAs).
 */
export function controlDispatcher(options: { ca: Buffer | null; connectTimeoutMs: number }): Dispatcher {
  return new Agent({
    connect: {
      timeout: options.connectTimeoutMs,
      keepAlive: true,
      keepAliveInitialDelay: KEEPALIVE_INITIAL_DELAY_MS,
      // With --ca, only a certificate that CA issued directly: a node's certificate (from the node CA under it) is refused.
      ...(controlPlaneConnect(options.ca) ?? {}),
    },
  });
}

export interface ControlCall {
  method: 'POST' | 'GET';
  headers: Record<string, string>;
  body?: string;
  /** Ends the call without blaming the link (the agent stops, or news cuts a long-poll short). */
  signal: AbortSignal;
  /** The whole call, connect to last byte of the answer, ms. */
  deadlineMs: number;
  /** Absent: undici's global dispatcher. */
  dispatcher?: Dispatcher | undefined;
}

/**
 * One call to a control plane that answers, fails, or is given up on at its
 * deadline. The call settles at the deadline even where undici would not
 * act on the abort yet: a request whose TCP connect hangs (the SYN dropped)
 * sees it only when its connect timeout ends the attempt. A deadline is
 * thrown as LLMGW_CONTROL_UNANSWERED; an abort through `signal` and
 * transport errors are thrown as they are.
 */
export async function callControl(url: string, call: ControlCall): Promise<{ statusCode: number; text: string }> {
  const deadline = AbortSignal.timeout(call.deadlineMs);
  const signal = AbortSignal.any([call.signal, deadline]);
  let onAbort = (): void => {};
  const aborted = new Promise<never>((_resolve, reject) => {
    onAbort = () => reject(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  aborted.catch(() => {});
  try {
    const pending = request(url, {
      method: call.method,
      headers: call.headers,
      ...(call.body !== undefined ? { body: call.body } : {}),
      signal,
      headersTimeout: call.deadlineMs,
      bodyTimeout: call.deadlineMs,
      ...(call.dispatcher ? { dispatcher: call.dispatcher } : {}),
    });
    // The request settles later, when undici gets to the abort; nobody waits for it then.
    pending.catch(() => {});
    const res = await Promise.race([pending, aborted]);
    const text = await Promise.race([res.body.text(), aborted]);
    return { statusCode: res.statusCode, text };
  } catch (err) {
    // undici's own header and body timers are set to the same deadline but tick on a coarser clock,
    // so either may fire first: both mean the control plane did not answer in time.
    if ((deadline.aborted || isUndiciTimeout(err)) && !call.signal.aborted) {
      const origin = new URL(url).origin;
      throw new LlmgwError(
        'LLMGW_CONTROL_UNANSWERED',
        `the control plane at ${origin} did not answer within ${call.deadlineMs} ms: the link to it may be cut (packets dropped) or it may be paused; trying the next control plane. ` +
          'If it is only slow, give the agent a longer --control-deadline',
        { context: { control: origin, deadlineMs: call.deadlineMs }, cause: err },
      );
    }
    throw err;
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

/** undici's headers, body and connect timeouts: the peer said nothing in time, as at our own deadline. */
function isUndiciTimeout(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT';
}

/**
 * The agent's client for its control planes: callControl over a pool of its
 * own (controlDispatcher), which is thrown away when a call is given up on,
 * because undici lets the next request to that control plane wait behind a
 * connect still hanging into the silent link. An injected dispatcher (tests,
 * benchmarks) belongs to the caller and is kept.
 */
export class ControlClient {
  #dispatcher: Dispatcher;
  readonly #own: boolean;

  constructor(
    private readonly options: { ca: Buffer | null; connectTimeoutMs: number; dispatcher?: Dispatcher | undefined },
  ) {
    this.#own = options.dispatcher === undefined;
    this.#dispatcher = options.dispatcher ?? controlDispatcher(options);
  }

  async call(url: string, call: Omit<ControlCall, 'dispatcher'>): Promise<{ statusCode: number; text: string }> {
    try {
      return await callControl(url, { ...call, dispatcher: this.#dispatcher });
    } catch (err) {
      if (this.#own && err instanceof LlmgwError && err.code === 'LLMGW_CONTROL_UNANSWERED') {
        const old = this.#dispatcher;
        this.#dispatcher = controlDispatcher(this.options);
        void old.destroy().catch(() => {});
      }
      throw err;
    }
  }

  /** Destroyed, not closed: a long-poll cut short leaves a socket a graceful close would wait on. */
  async close(): Promise<void> {
    if (this.#own) await this.#dispatcher.destroy().catch(() => {});
  }
}
