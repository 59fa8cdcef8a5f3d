// Leader election over a Postgres advisory lock, for several control planes
// on one store. The lock lives on a dedicated connection (never a pooled
// one: a pool would hand the session, and the lock, to another query), so
// the lock is exactly as alive as that connection. Followers try for it
// every retry interval; a leader that loses the connection, or fails the
// probe it runs on it each interval, steps down at once. Acquiring bumps the
// role's epoch in the store, which fences writes of any earlier holder. A
// non-candidate (a gateway process) keeps only the connection, for the
// changes announced on it, and probes it as a leader does.
import pg from 'pg';
import type { Logger } from 'pino';
import { CHANGES_CHANNEL, type Store } from '../store/index.js';

/** The advisory lock's key pair: "llmg" and the role number; any other user of advisory locks on this database must avoid it. */
const LOCK_CLASS = 0x6c6c6d67;
const ROLE_NUMBERS: Readonly<Record<string, number>> = { reconciler: 1 };

export interface LeaderElectorOptions {
  store: Store;
  /** The Postgres URL; the elector opens its own connection to it. */
  url: string;
  instanceId: string;
  /** The role led; the leadership table's row name. Default 'reconciler'. */
  role?: string;
  /** How often a follower tries for the lock and a leader probes its connection, ms. Default 1000. */
  retryIntervalMs?: number;
  /**
   * The server ends the lock session after this long without a query, ms
   * (Postgres 14+ idle_session_timeout). A paused leader (SIGSTOP, a frozen
   * VM) keeps its TCP connection, and so its lock, forever otherwise; this is
   * how long such a pause may last before another instance leads. Default
   * five retry intervals; 0 = never (then only a closed connection frees the lock).
   */
  idleSessionTimeoutMs?: number;
  now: () => number;
  logger: Logger;
  /** Told once per acquisition, after the epoch is stored. A throw steps down again. */
  onElected(epoch: number): Promise<void>;
  /** Told once per loss, before anything else runs: stop acting as leader now. */
  onDeposed(reason: string): void;
  /** Topics NOTIFYed on CHANGES_CHANNEL, heard on the same connection. */
  onChange?(topic: string): void;
  /**
   * False: never tries for the lock; the connection only listens for changes
   * (a gateway process, which follows and never leads). Absent = true.
   */
  candidate?: boolean;
}

export class LeaderElector {
  private client: pg.Client | null = null;
  private timer: NodeJS.Timeout | null = null;
  private epoch: number | null = null;
  private closed = false;
  private ticking: Promise<void> = Promise.resolve();
  private readonly role: string;
  private readonly retryMs: number;

  constructor(private readonly options: LeaderElectorOptions) {
    this.role = options.role ?? 'reconciler';
    this.retryMs = options.retryIntervalMs ?? 1000;
  }

  /** The epoch held; null = not leading. */
  get heldEpoch(): number | null {
    return this.epoch;
  }

  get leading(): boolean {
    return this.epoch !== null;
  }

  start(): void {
    if (this.timer || this.closed) return;
    this.timer = setInterval(() => void this.kick(), this.retryMs);
    this.timer.unref();
    void this.kick();
  }

  /** One attempt now (tests, and start); attempts never overlap. */
  kick(): Promise<void> {
    this.ticking = this.ticking
      .then(() => this.tick())
      .catch((err: unknown) => this.options.logger.error({ err }, 'leader election step failed'));
    return this.ticking;
  }

  /** Gives the lead up: the connection is closed, which releases the lock at the server. */
  stepDown(reason: string): void {
    const client = this.client;
    this.client = null;
    this.depose(reason);
    if (client) void client.end().catch(() => {});
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.ticking;
    const client = this.client;
    this.client = null;
    if (this.epoch !== null) this.depose('this control plane is shutting down');
    // Ending the session releases the advisory lock, so a follower takes over within one retry interval.
    if (client) await client.end().catch(() => {});
  }

  private depose(reason: string): void {
    if (this.epoch === null) return;
    const epoch = this.epoch;
    this.epoch = null;
    this.options.logger.warn({ role: this.role, epoch, reason }, 'stepped down as leader');
    this.options.onDeposed(reason);
  }

  private async tick(): Promise<void> {
    if (this.closed) return;
    const client = this.client ?? (await this.connect());
    if (!client) return;
    if (this.epoch !== null || this.options.candidate === false) {
      // A connection that died quietly (a partition, a frozen server) answers no probe; waiting for TCP to notice could take minutes.
      try {
        await client.query('select 1');
      } catch (err) {
        this.stepDown(`the lock connection to the store failed a probe: ${(err as Error).message}`);
      }
      return;
    }
    const key = ROLE_NUMBERS[this.role] ?? 0;
    let got = false;
    try {
      const res = await client.query<{ ok: boolean }>('select pg_try_advisory_lock($1, $2) as ok', [LOCK_CLASS, key]);
      got = res.rows[0]?.ok === true;
    } catch (err) {
      this.dropClient(client, (err as Error).message);
      return;
    }
    if (!got || this.closed) return;
    let epoch: number;
    try {
      epoch = await this.options.store.leadership.acquireEpoch(this.role, this.options.instanceId, this.options.now());
    } catch (err) {
      // Holding the lock without an epoch would block every other instance: give it back.
      this.options.logger.warn(
        { err: (err as Error).message },
        'took the leader lock but could not record the epoch; releasing it',
      );
      await client
        .query('select pg_advisory_unlock($1, $2)', [LOCK_CLASS, key])
        .catch(() => this.dropClient(client, 'unlock failed'));
      return;
    }
    if (this.client !== client) return;
    this.epoch = epoch;
    this.options.logger.info({ role: this.role, epoch, instance: this.options.instanceId }, 'elected leader');
    try {
      await this.options.onElected(epoch);
    } catch (err) {
      this.stepDown(`taking over failed: ${(err as Error).message}`);
    }
  }

  private async connect(): Promise<pg.Client | null> {
    const client = new pg.Client({
      connectionString: this.options.url,
      connectionTimeoutMillis: Math.max(1000, this.retryMs * 2),
      keepAlive: true,
    });
    // Either event means the session, and with it the lock, is gone (or about to be): step down before anything else runs.
    client.on('error', (err) => this.dropClient(client, err.message));
    client.on('end', () => this.dropClient(client, 'the lock connection to the store ended'));
    client.on('notification', (msg) => {
      if (msg.channel === CHANGES_CHANNEL && msg.payload) this.options.onChange?.(msg.payload);
    });
    try {
      await client.connect();
      await client.query(`listen ${CHANGES_CHANNEL}`);
      const idleMs = this.options.idleSessionTimeoutMs ?? this.retryMs * 5;
      if (idleMs > 0) {
        await client.query(`set idle_session_timeout = ${Math.round(idleMs)}`).catch((err: unknown) => {
          this.options.logger.warn(
            { err: (err as Error).message },
            'this Postgres has no idle_session_timeout (it needs 14 or newer): a paused leader keeps the lead until its connection closes',
          );
        });
      }
    } catch (err) {
      client.removeAllListeners('end');
      await client.end().catch(() => {});
      this.options.logger.debug({ err: (err as Error).message }, 'cannot reach the store for leader election yet');
      return null;
    }
    if (this.closed) {
      await client.end().catch(() => {});
      return null;
    }
    this.client = client;
    // Changes missed while disconnected are picked up by the caller's polling; say so with a wildcard topic.
    this.options.onChange?.('*');
    return client;
  }

  private dropClient(client: pg.Client, reason: string): void {
    if (this.client !== client) return;
    this.client = null;
    this.depose(reason);
    void client.end().catch(() => {});
  }
}
