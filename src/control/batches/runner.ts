// The batch runner: takes batch lines from the store under a lease, runs
// each through the gateway's own path (an in-process call as the batch's
// key, at priority batch), records each answer with its done mark in one
// statement, and ends each batch by writing its output and error files from
// the recorded answers, one entry per line. A control plane killed mid-batch
// leaves leases that lapse: it resumes the batch on restart (at once on
// SQLite, whose store no other instance writes), or another instance on the
// same Postgres takes the lines over once their leases lapse. How many lines
// of a model may start is the pacing's (BatchPace), asked on a short timer
// and whenever a line ends.
import { createHash, randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { InProcessAnswer } from '../../gateway/index.js';
import type { BatchRepository, BatchRow, ClaimedLine } from './batch-store.js';
import type { FileContent, ContentWriter } from './content.js';
import type { FileRecord } from './files-store.js';
import { lineStarts, requestAt } from './input.js';
import { newId } from './service.js';
import { MAX_TIMER_MS } from '../../units/index.js';

/** How many MORE batch lines of a model may start now; 0 = wait. Asked per model at every look. */
export interface BatchPace {
  slots(model: string): number;
}

/** Runs one request as the batch's key (by id; 'anonymous' = no key), through the gateway. */
export type LineCall = (keyId: string, path: string, body: unknown) => Promise<InProcessAnswer>;

export interface RunnerOptions {
  readonly batches: BatchRepository;
  readonly content: FileContent;
  readonly pace: BatchPace;
  readonly call: LineCall;
  readonly leaseMs: number;
  readonly now: () => number;
  readonly logger: Logger;
  /** True: no other instance writes this store (SQLite): leases left by a killed process are freed at start. */
  readonly alone: boolean;
  /** How often the runner looks without being told, ms. */
  readonly tickMs?: number;
}

/** Statuses of a refusal worth running again later (the gateway busy, a queue's wait over), never a line's fault. */
const RETRY_ALWAYS = new Set([408, 429, 503]);
/**
 * Failures that may pass (an engine's error): a line is tried this many times
 * in all before one becomes its answer. Only these tries count (attempts),
 * never waits for a busy gateway, which docs/batches.md says are not failures.
 */
const RETRY_SOME = new Set([500, 502, 504]);
const MAX_ATTEMPTS = 3;
/** Lines read from the store at once when the files are written. */
const PAGE = 2000;

export class BatchRunner {
  /** This process's name on the leases it takes; a restart is another owner. */
  readonly owner = `runner-${randomUUID()}`;
  private readonly inFlightByModel = new Map<string, number>();
  /** Each running batch's input, read once: the promise is kept, so lines launched together share one read. */
  private readonly inputs = new Map<string, Promise<{ text: string; starts: number[] }>>();
  private timer: NodeJS.Timeout | null = null;
  private renewTimer: NodeJS.Timeout | null = null;
  private ticking: Promise<void> | null = null;
  private again = false;
  private stopped = false;
  private readonly running = new Set<Promise<void>>();

  constructor(private readonly o: RunnerOptions) {}

  /** Lines of the model this runner is running now. */
  inFlight(model: string): number {
    return this.inFlightByModel.get(model) ?? 0;
  }

  async start(): Promise<void> {
    if (this.o.alone) {
      const freed = await this.o.batches.releaseAll();
      if (freed > 0) this.o.logger.info({ freed }, 'batch lines left running by an earlier process are resumed');
    }
    this.timer = setInterval(() => this.notify(), this.o.tickMs ?? 500).unref();
    this.renewTimer = setInterval(
      () => {
        this.o.batches
          .renew(this.owner, this.o.now() + this.o.leaseMs)
          .catch((err: unknown) => this.o.logger.warn({ err }, 'could not renew batch line leases'));
      },
      // A third of the lease, within what a timer can hold (past it Node would renew every millisecond).
      Math.min(MAX_TIMER_MS, Math.max(50, Math.floor(this.o.leaseMs / 3))),
    ).unref();
    this.notify();
  }

  /** Looks now (or right after the look in progress). */
  notify(): void {
    if (this.stopped) return;
    if (this.ticking) {
      this.again = true;
      return;
    }
    this.ticking = this.tick()
      .catch((err: unknown) => this.o.logger.warn({ err }, 'batch runner pass failed; trying again shortly'))
      .finally(() => {
        this.ticking = null;
        if (this.again) {
          this.again = false;
          this.notify();
        }
      });
  }

  /** Stops taking lines, waits for those running, and gives back their leases' rest. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    if (this.renewTimer) clearInterval(this.renewTimer);
    await this.ticking;
    await Promise.allSettled([...this.running]);
    await this.o.batches.release(this.owner).catch(() => {});
  }

  private async tick(): Promise<void> {
    const { batches } = this.o;
    const runnable: BatchRow[] = [];
    const active = await batches.active();
    // A batch another instance ended is no longer active here: its input is not held for the life of the process.
    const ids = new Set(active.map((b) => b.id));
    for (const id of this.inputs.keys()) if (!ids.has(id)) this.inputs.delete(id);
    for (const b of active) {
      const now = this.o.now();
      if (b.status === 'validating') {
        await batches.move(b.id, ['validating'], 'in_progress', now);
        b.status = 'in_progress';
      }
      if ((b.status === 'in_progress' || b.status === 'cancelling') && now >= b.expires_at) {
        await this.end(b, 'expired');
        continue;
      }
      if (b.status === 'cancelling') {
        // What close() left open runs under a live lease: the cancel waits for it to finish.
        await batches.close(b.id, 'batch_cancelled', now, false);
        if (!(await batches.anyOpen(b.id))) await this.end(b, 'cancelled');
        continue;
      }
      if (b.status === 'finalizing') {
        await this.end(b, 'completed');
        continue;
      }
      if (!(await batches.anyOpen(b.id))) {
        await this.end(b, 'completed');
        continue;
      }
      runnable.push(b);
    }
    if (this.stopped || runnable.length === 0) return;
    const byId = new Map(runnable.map((b) => [b.id, b]));
    const runnableIds = [...byId.keys()];
    for (const model of await batches.waitingModels(runnableIds, this.o.now())) {
      const n = Math.floor(this.o.pace.slots(model));
      if (n <= 0) continue;
      const now = this.o.now();
      const lines = await batches.claim(runnableIds, model, n, this.owner, now + this.o.leaseMs, now);
      for (const line of lines) this.launch(byId.get(line.batchId)!, line);
    }
  }

  private launch(batch: BatchRow, line: ClaimedLine): void {
    this.inFlightByModel.set(line.model, this.inFlight(line.model) + 1);
    const p = this.runLine(batch, line)
      .catch(async (err: unknown) => {
        this.o.logger.warn({ err, batch: batch.id, line: line.line }, 'batch line failed; it is tried again');
        // Given back, not left running: the renew timer would hold a line no call is running until the batch expired.
        await this.o.batches
          .retryLater(line, this.owner, this.o.now() + 1000)
          .catch((e: unknown) => this.o.logger.warn({ err: e, batch: batch.id }, 'could not give a batch line back'));
      })
      .finally(() => {
        const left = this.inFlight(line.model) - 1;
        if (left > 0) this.inFlightByModel.set(line.model, left);
        else this.inFlightByModel.delete(line.model);
        this.running.delete(p);
        this.notify();
      });
    this.running.add(p);
  }

  private async runLine(batch: BatchRow, line: ClaimedLine): Promise<void> {
    const input = await this.input(batch);
    const request = requestAt(input.text, input.starts, line.line);
    let answer: InProcessAnswer;
    try {
      answer = await this.o.call(batch.key_id, request.url, request.body);
    } catch (err) {
      this.o.logger.warn({ err, batch: batch.id, line: line.line }, 'batch line could not be sent; it is retried');
      answer = { status: 503, headers: {}, body: '{}' };
    }
    const { status } = answer;
    const failedTry = RETRY_SOME.has(status);
    if (RETRY_ALWAYS.has(status) || (failedTry && line.attempts + 1 < MAX_ATTEMPTS)) {
      const after = Number(answer.headers['retry-after']);
      const waitMs = Number.isFinite(after) && after > 0 ? Math.min(after * 1000, 60_000) : 1000;
      await this.o.batches.retryLater(line, this.owner, this.o.now() + waitMs, failedTry);
      return;
    }
    let body: unknown;
    try {
      body = JSON.parse(answer.body);
    } catch {
      body = answer.body;
    }
    const requestId = answer.headers['x-request-id'];
    const entry = {
      id: newId('batch_req_'),
      custom_id: line.customId,
      response: { status_code: status, request_id: typeof requestId === 'string' ? requestId : null, body },
      error: null,
    };
    await this.o.batches.finish(line, this.owner, JSON.stringify(entry), status >= 400);
  }

  private input(batch: BatchRow): Promise<{ text: string; starts: number[] }> {
    let input = this.inputs.get(batch.id);
    if (!input) {
      input = this.o.content.read(batch.input_file_id).then((bytes) => {
        const text = bytes.toString('utf8');
        return { text, starts: lineStarts(text) };
      });
      // A failed read is not kept: the line goes back, and the next one reads again.
      input.catch(() => this.inputs.delete(batch.id));
      this.inputs.set(batch.id, input);
    }
    return input;
  }

  /**
   * Ends the batch: closes what did not run (expired or cancelled), writes
   * the output and error files from the recorded answers, one entry per
   * line, and records the status, all under the batch's ending lease so one
   * instance writes them. The files' ids are the batch's own (batchFileId):
   * a try lost after its files were renamed into place is overwritten by the next.
   */
  private async end(b: BatchRow, status: 'completed' | 'expired' | 'cancelled'): Promise<void> {
    const { batches } = this.o;
    let now = this.o.now();
    if (!(await batches.claimEnding(b.id, this.owner, now + this.o.leaseMs, now))) return;
    if (status === 'completed') await batches.move(b.id, ['in_progress'], 'finalizing', now);
    else await batches.close(b.id, status === 'expired' ? 'batch_expired' : 'batch_cancelled', now, true);
    const output = await this.writer(b, 'output');
    const errors = await this.writer(b, 'error');
    try {
      let after = 0;
      for (;;) {
        const page = await batches.doneLines(b.id, after, PAGE);
        if (page.length === 0) break;
        for (const l of page) {
          after = l.line;
          if (l.errorCode !== null) {
            await errors.add(
              JSON.stringify({
                id: newId('batch_req_'),
                custom_id: l.customId,
                response: null,
                error: { code: l.errorCode, message: ERROR_MESSAGES[l.errorCode] ?? l.errorCode },
              }),
            );
          } else if (l.failed) await errors.add(l.result!);
          else await output.add(l.result!);
        }
      }
      now = this.o.now();
      const [out, err] = [await output.done(now), await errors.done(now)];
      const ended = await batches.end(
        b.id,
        this.owner,
        status,
        now,
        { completed: output.lines, failed: errors.lines },
        { output: out, error: err },
      );
      if (ended) {
        this.inputs.delete(b.id);
        this.o.logger.info({ batch: b.id, status, completed: output.lines, failed: errors.lines }, 'batch ended');
      }
    } catch (e) {
      await output.abort();
      await errors.abort();
      throw e;
    }
  }

  /** A file of one kind for the batch, made on its first line; done() gives its record (null = no line). */
  private async writer(b: BatchRow, kind: 'output' | 'error') {
    const id = batchFileId(b.id, kind);
    let w: ContentWriter | null = null;
    let lines = 0;
    const content = this.o.content;
    return {
      get lines() {
        return lines;
      },
      async add(line: string) {
        w ??= await content.create(id);
        lines += 1;
        await w.write(`${line}\n`);
      },
      async done(nowMs: number): Promise<FileRecord | null> {
        if (!w) return null;
        await w.commit();
        return {
          id,
          owner: b.owner,
          purpose: 'batch_output',
          filename: `${b.id}_${kind}.jsonl`,
          bytes: w.bytes,
          lines,
          createdAtMs: nowMs,
        };
      },
      async abort() {
        await w?.abort();
      },
    };
  }
}

/**
 * The id of a batch's output or error file: the same on every try, so a try
 * whose end() never landed (the process killed between renaming the file
 * into place and the row that names it) leaves no file behind: the next try
 * renames its own over it. Derived from the batch's random id, so no more
 * guessable than a random one; files are per owner anyway.
 */
export function batchFileId(batchId: string, kind: 'output' | 'error'): string {
  return `file-${createHash('sha256').update(`${batchId}\n${kind}`).digest('hex').slice(0, 32)}`;
}

const ERROR_MESSAGES: Record<string, string> = {
  batch_expired: 'This request could not be executed before the completion window expired.',
  batch_cancelled: 'The batch was cancelled before this request ran.',
};
