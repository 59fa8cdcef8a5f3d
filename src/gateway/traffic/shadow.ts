// The shadow runner: sends the copy of a sampled request to the model's
// candidate once the client's own request has gone upstream, reads its
// answer to the end (time to first byte, total, tokens), discards it, and
// reports both sides to the board. The copy never touches the client's
// answer: it is started on a later turn of the event loop than the client's
// send, has its own budget of copies in flight per model (past it a copy is
// dropped, never queued), its own timeout, and is charged to no key: no
// rate limit, no usage record. Separate from the attempt loop, which must
// not know copies exist.
import type { Logger } from 'pino';
import type { Pool } from 'undici';
import type { RoutedModel, RouterReplica, ShadowRule } from '../ports/index.js';
import type { ShadowBoard, SideSample } from './board.js';

/** A request sampled for its model's shadow, carried from intake to its first upstream attempt. */
export interface ShadowPlan {
  /** The model the client named, which carries the shadow. */
  readonly model: string;
  readonly rule: ShadowRule;
  /** The API the client called, which the candidate must serve. */
  readonly endpoint: string;
  /** performance.now() when the client's request went upstream; null until then (and when it never did). */
  sentAt: number | null;
  /** The copy was sent: the primary side is recorded when the request ends. */
  copied: boolean;
}

/** A plan for a request the draw picked (sampledForShadow). */
export function shadowPlan(model: RoutedModel, endpoint: string): ShadowPlan | null {
  if (!model.shadow) return null;
  return { model: model.name, rule: model.shadow, endpoint, sentAt: null, copied: false };
}

/** What the copy is made of: the request as the engine would hear it, and how to pick a replica of the candidate. */
export interface ShadowCopy {
  /** The client's request id: the copy goes upstream as `<id>-shadow`. */
  readonly id: string;
  /** The engine path of the client's attempt (`/v1/chat/completions`, …). */
  readonly path: string;
  /** The client's JSON body, parsed: the copy is the same with the candidate's name (and a stream asks for its usage). */
  readonly body: Readonly<Record<string, unknown>>;
  readonly stream: boolean;
  /** A ready replica of the candidate and its pool; null = none ready. */
  pick(candidate: RoutedModel): { replica: RouterReplica; upstream: { pool: Pool; basePath: string } } | null;
}

export interface ShadowRunnerDeps {
  resolve(nameOrAlias: string): RoutedModel | undefined;
  /** Whether the model serves the API the request was for. */
  serves(model: RoutedModel, endpoint: string): boolean;
  board: ShadowBoard;
  logger: Logger;
  /** Absent = performance.now. */
  now?: () => number;
}

/** How much of a copy's answer is kept to read its usage from; the rest is read and dropped. */
const KEEP_ANSWER_BYTES = 1 << 20;

export class ShadowRunner {
  private readonly now: () => number;

  constructor(private readonly deps: ShadowRunnerDeps) {
    this.now = deps.now ?? (() => performance.now());
  }

  /**
   * The client's request was just handed to its pool: the copy is decided
   * now (dropped if the candidate is busy, gone or has no ready replica) and
   * sent on the next turn, after the client's send has had its own.
   */
  launch(plan: ShadowPlan, copy: ShadowCopy): void {
    plan.sentAt = this.now();
    const { board } = this.deps;
    const candidate = this.deps.resolve(plan.rule.model);
    const name = candidate?.name ?? plan.rule.model;
    if (!candidate || !this.deps.serves(candidate, plan.endpoint)) return board.dropped(plan.model, name, 'not_served');
    if (board.inFlight(plan.model) >= plan.rule.maxConcurrent) return board.dropped(plan.model, name, 'busy');
    const picked = copy.pick(candidate);
    if (!picked) return board.dropped(plan.model, name, 'no_replica');
    // A remote speaking the Responses or Messages API takes only its own API, and the copy is not translated to it.
    if (picked.replica.remote?.api) return board.dropped(plan.model, name, 'not_served');
    plan.copied = true;
    board.copied(plan.model, name);
    const body: Record<string, unknown> = { ...copy.body, model: candidate.name };
    if (copy.stream) body.stream_options = { ...(body.stream_options as object | undefined), include_usage: true };
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: copy.stream ? 'text/event-stream' : 'application/json',
      'x-request-id': `${copy.id}-shadow`,
    };
    // As for the client's attempts: the engine's secret, never the client's key.
    if (picked.replica.engineSecret !== undefined) headers.authorization = `Bearer ${picked.replica.engineSecret}`;
    setImmediate(() => {
      void this.send(plan, name, picked.upstream, copy.path, headers, JSON.stringify(body), copy.stream);
    });
  }

  private async send(
    plan: ShadowPlan,
    candidate: string,
    upstream: { pool: Pool; basePath: string },
    path: string,
    headers: Record<string, string>,
    body: string,
    stream: boolean,
  ): Promise<void> {
    const started = this.now();
    const abort = new AbortController();
    // Unref'd: a copy running at shutdown must not hold the process (closing the router destroys its pools and the copy with them).
    const timer = setTimeout(() => abort.abort(), plan.rule.timeoutMs).unref();
    let ttftMs: number | null = null;
    let ok = false;
    let tokens = { prompt: 0, completion: 0 };
    try {
      const res = await upstream.pool.request({
        path: upstream.basePath + path,
        method: 'POST',
        headers,
        body,
        signal: abort.signal,
      });
      const kept: Buffer[] = [];
      let keptBytes = 0;
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        if (ttftMs === null) ttftMs = this.now() - started;
        kept.push(chunk);
        keptBytes += chunk.length;
        // A stream's usage comes last: keep the newest bytes.
        while (keptBytes > KEEP_ANSWER_BYTES && kept.length > 1) keptBytes -= kept.shift()!.length;
      }
      ok = res.statusCode < 400;
      tokens = usageOf(Buffer.concat(kept).toString('utf8'), stream);
    } catch (err) {
      this.deps.logger.debug({ err, model: plan.model, candidate }, 'a shadow copy failed');
    } finally {
      clearTimeout(timer);
      this.deps.board.record(plan.model, candidate, 'shadow', {
        ok,
        ttftMs,
        totalMs: this.now() - started,
        promptTokens: tokens.prompt,
        completionTokens: tokens.completion,
      });
    }
  }

  /**
   * The client's request ended: its side of the comparison, when its copy
   * was sent. `ttftMs` and the tokens are the request log's figures (from
   * arrival); the times are taken from the client's send, as the copy's are.
   */
  primaryEnded(
    plan: ShadowPlan | null | undefined,
    startedAt: number,
    status: number,
    ended: { readonly ttftMs?: number; readonly promptTokens?: number; readonly completionTokens?: number },
  ): void {
    if (!plan?.copied || plan.sentAt === null) return;
    const candidate = this.deps.resolve(plan.rule.model)?.name ?? plan.rule.model;
    const totalMs = this.now() - plan.sentAt;
    const sentAt = plan.sentAt;
    // The ledger reads the answer's usage into the record on the turn after the answer (off the client's path): read it after that.
    setImmediate(() => {
      const sample: SideSample = {
        ok: status >= 200 && status < 400,
        ttftMs: ended.ttftMs === undefined ? null : Math.max(0, startedAt + ended.ttftMs - sentAt),
        totalMs,
        promptTokens: ended.promptTokens ?? 0,
        completionTokens: ended.completionTokens ?? 0,
      };
      this.deps.board.record(plan.model, candidate, 'primary', sample);
    });
  }
}

/** The usage an answer reports: a whole answer's `usage`, or a stream's last event that has one; zeros when none does. */
export function usageOf(text: string, stream: boolean): { prompt: number; completion: number } {
  const read = (u: unknown) => {
    const usage = u as { prompt_tokens?: unknown; completion_tokens?: unknown } | null | undefined;
    if (typeof usage !== 'object' || usage === null) return null;
    return {
      prompt: typeof usage.prompt_tokens === 'number' ? usage.prompt_tokens : 0,
      completion: typeof usage.completion_tokens === 'number' ? usage.completion_tokens : 0,
    };
  };
  try {
    if (!stream) return read((JSON.parse(text) as { usage?: unknown }).usage) ?? { prompt: 0, completion: 0 };
  } catch {
    return { prompt: 0, completion: 0 };
  }
  const lines = text.split('\n');
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = lines[i]!;
    if (!line.startsWith('data:') || !line.includes('"usage"')) continue;
    try {
      const found = read((JSON.parse(line.slice(5)) as { usage?: unknown }).usage);
      if (found) return found;
    } catch {
      // A line cut by the kept window: an earlier one may hold it.
    }
  }
  return { prompt: 0, completion: 0 };
}
