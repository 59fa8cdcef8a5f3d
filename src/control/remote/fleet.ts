// The catalog's remote models as the gateway sees them: each `engine: remote`
// model is presented through the ReplicaDirectory port as one replica (its
// endpoint, the name it serves, its API key attached server-side), while its
// last probe passed; a peer llmgw carries its fleet's load. Everything else
// is the reconciler's directory, passed through. Probing runs on its own
// timer; the directory answers from memory.
import type { Logger } from 'pino';
import { readFileSync } from 'node:fs';
import type { ReplicaDirectory, RouterReplica } from '../../gateway/index.js';
import type { Model } from '../catalog/index.js';
import type { RemoteEndpoint } from '../catalog/remote.js';
import { judgeProbe, runProbe, type ProbeResult, type RemoteHealth } from './probe.js';

/** What the fleet reads of the catalog. */
export interface RemoteCatalog {
  models(): readonly Model[];
  get(name: string): Model | undefined;
}

export interface RemoteFleetOptions {
  readonly catalog: RemoteCatalog;
  /** A stored API key by model name (src/control/secrets); undefined = none stored. */
  readonly storedKey: (model: string) => Promise<string | undefined>;
  /**
   * A stored key already opened in memory, read without waiting; undefined = not opened yet (or none). Absent =
   * never known at once: a stored-key remote then waits out of routing for its round to read the key.
   */
  readonly openedKey?: (model: string) => string | undefined;
  readonly intervalMs: number;
  readonly now: () => number;
  readonly logger: Logger;
  /** The probe itself; absent = runProbe (tests pass a stand-in). */
  readonly probe?: (url: string, api: RemoteEndpoint['api'], key: string | undefined) => Promise<ProbeResult>;
}

/** What the fleet knows of one remote model. */
interface RemoteState {
  readonly endpoint: RemoteEndpoint;
  health: RemoteHealth | null;
  /** The key sent upstream; undefined = none. Never logged. */
  key: string | undefined;
  replica: RouterReplica | null;
  probedAtMs: number;
}

/** A probe gives up after this long (or the interval, if shorter): a hung remote must not stall the next round. */
const PROBE_TIMEOUT_MS = 5_000;

export class RemoteFleet {
  private readonly states = new Map<string, RemoteState>();
  private readonly listeners = new Set<() => void>();
  private timer: NodeJS.Timeout | null = null;
  private round: Promise<void> | null = null;

  constructor(private readonly options: RemoteFleetOptions) {}

  /** Probes now, then every interval. */
  start(): Promise<void> {
    this.timer ??= setInterval(() => void this.probeAll(), this.options.intervalMs).unref();
    return this.probeAll();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** One round of probes over every remote model in the catalog (a round in progress is joined, not doubled). */
  probeAll(): Promise<void> {
    this.round ??= this.runRound().finally(() => (this.round = null));
    return this.round;
  }

  /** A remote model's health for views, with a peer's capacity and load as read from its API: null = not a remote model. */
  health(model: string): {
    healthy: boolean;
    reason: string;
    probedAtMs: number;
    ready?: number;
    running?: number;
    waiting?: number;
  } | null {
    const s = this.states.get(model);
    if (!s) return null;
    const h = s.health;
    return {
      healthy: h?.healthy ?? true,
      reason: h?.reason ?? 'not probed yet',
      probedAtMs: s.probedAtMs,
      ...(h?.replicas === undefined ? {} : { ready: h.replicas }),
      ...(h?.load ? { running: h.load.running, waiting: h.load.waiting } : {}),
    };
  }

  /** `inner` with every remote model's replica added: the directory the gateway is given. */
  directory(inner: ReplicaDirectory): ReplicaDirectory {
    return {
      ready: (model) => {
        const m = this.options.catalog.get(model);
        if (!m?.remote) return inner.ready(model);
        const r = this.replicaOf(m);
        return r ? [r] : [];
      },
      describe: (model) => {
        const m = this.options.catalog.get(model);
        if (!m?.remote) return inner.describe(model);
        const h = this.states.get(model)?.health;
        const why = h?.reason || (h ? 'its credential could not be read' : this.keyNotYet(m.remote));
        return `it is the remote endpoint ${m.remote.url}, which is out of routing: ${why}`;
      },
      // Nothing is started for a remote: a request for one that is down is answered at once.
      demand: (model) => (this.options.catalog.get(model)?.remote ? false : inner.demand(model)),
      subscribe: (listener) => {
        this.listeners.add(listener);
        const off = inner.subscribe?.(listener);
        return () => {
          this.listeners.delete(listener);
          off?.();
        };
      },
    };
  }

  /**
   * The model's replica while its last probe passed (or none ran yet); null = out of routing. Never one without
   * the credential its catalog entry names: a remote whose key is not yet read waits out of routing (a 503 with
   * the reason), rather than going upstream with no key and taking the remote's 401.
   */
  private replicaOf(m: Model): RouterReplica | null {
    let s = this.states.get(m.name);
    if (!s || s.endpoint !== m.remote) {
      // A model added (or recompiled by a catalog reload) since the last round: presented at once, probed next round.
      s = this.stateOf(m, m.remote!);
      void this.probeAll();
    }
    if (s.health && !s.health.healthy) return null;
    if (m.remote!.key.kind !== 'none' && s.key === undefined) return null;
    s.replica ??= this.buildReplica(m.name, s);
    return s.replica;
  }

  /**
   * A fresh state for `endpoint`, its key read at once where that needs no wait (inline, file, a stored key
   * already opened): whoever reads the state next, a request or a round's probe, sees the key with the endpoint.
   */
  private stateOf(m: Model, endpoint: RemoteEndpoint): RemoteState {
    const key = endpoint.key.kind === 'stored' ? this.options.openedKey?.(m.name) : this.keyNow(m);
    const s: RemoteState = { endpoint, health: null, key, replica: null, probedAtMs: 0 };
    this.states.set(m.name, s);
    return s;
  }

  private buildReplica(name: string, s: RemoteState): RouterReplica {
    const e = s.endpoint;
    return {
      id: `remote:${name}`,
      endpoint: e.url,
      draining: false,
      servedNames: [e.servedModel],
      engine: 'remote',
      remote: e.traits,
      ...(s.key ? { engineSecret: s.key } : {}),
      ...(s.health?.load ? { load: { ...s.health.load, sampledAtMs: s.probedAtMs } } : {}),
    };
  }

  /** Why a remote not probed yet has no key: a stored one is read in the background; a file one was unreadable just now. */
  private keyNotYet(e: RemoteEndpoint): string {
    return e.key.kind === 'file' ? `its api_key_file ${e.key.path} cannot be read` : 'its API key is being read';
  }

  /** The key of an inline or file credential, read now; undefined = none or unreadable. */
  private keyNow(m: Model): string | undefined {
    const k = m.remote!.key;
    if (k.kind === 'inline') return k.secret.reveal();
    if (k.kind !== 'file') return undefined;
    try {
      return readFileSync(k.path, 'utf8').trim() || undefined;
    } catch {
      return undefined;
    }
  }

  private async runRound(): Promise<void> {
    const models = this.options.catalog.models().filter((m) => m.remote);
    const names = new Set(models.map((m) => m.name));
    for (const name of this.states.keys()) if (!names.has(name)) this.states.delete(name);
    let changed = false;
    await Promise.all(
      models.map(async (m) => {
        const e = m.remote!;
        let s = this.states.get(m.name);
        if (!s || s.endpoint !== e) s = this.stateOf(m, e);
        const wasReady = s.health === null || s.health.healthy;
        let key: string | undefined;
        let keyProblem = '';
        try {
          key = e.key.kind === 'stored' ? await this.options.storedKey(m.name) : this.keyNow(m);
          if (key === undefined && e.key.kind === 'stored') keyProblem = 'its API key is not in the store';
          if (key === undefined && e.key.kind === 'file') keyProblem = `its api_key_file ${e.key.path} cannot be read`;
        } catch (err) {
          keyProblem = `its stored API key cannot be opened: ${(err as Error).message}`;
        }
        const health: RemoteHealth = keyProblem
          ? { healthy: false, reason: keyProblem }
          : judgeProbe(e.api, e.servedModel, await this.probeOne(e, key));
        s.key = key;
        s.health = health;
        s.probedAtMs = this.options.now();
        s.replica = null;
        if (wasReady !== health.healthy) {
          changed = true;
          // The reason names the remote and a status, never the key.
          this.options.logger.warn(
            { model: m.name, url: e.url, healthy: health.healthy },
            health.healthy ? 'remote endpoint is back in routing' : `remote endpoint out of routing: ${health.reason}`,
          );
        }
      }),
    );
    if (changed) for (const l of this.listeners) l();
  }

  private probeOne(e: RemoteEndpoint, key: string | undefined): Promise<ProbeResult> {
    if (this.options.probe) return this.options.probe(e.url, e.api, key);
    return runProbe(e.url, e.api, key, Math.min(PROBE_TIMEOUT_MS, this.options.intervalMs));
  }
}
