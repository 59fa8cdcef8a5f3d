// The gateway's connections to the engines: one keep-alive pool per replica
// endpoint, made on first use, closed by sweep() once no model lists the
// endpoint as ready and it carries nothing, destroyed on close(). Apart from
// the attempt loop so that count_tokens and the sweep reach the same pools.
// Attempts at a plain-HTTP endpoint go through the gateway's own engine
// client (engine-client/), which costs a fraction of undici's CPU per
// request; https endpoints, and the few requests that want a whole body
// back (count_tokens, shadows), go through undici.
import { Pool, type Dispatcher } from 'undici';
import { nodeIdentity } from '../../tls/index.js';
import { EnginePool, type EngineRequest } from '../engine-client/index.js';

/** What an attempt is sent through: undici's pool or the engine client, the same dispatch either way. */
export interface AttemptSender {
  dispatch(req: EngineRequest, handler: Dispatcher.DispatchHandler): boolean;
  readonly stats: { readonly running: number; readonly pending: number };
  close(): Promise<void>;
  destroy(): Promise<void>;
}

/** A replica endpoint's keep-alive pools and its path prefix ('' for a bare origin). */
export interface Upstream {
  /** undici's pool: request() for count_tokens and shadows. */
  readonly pool: Pool;
  /** Where attempts go: the engine client for http, `pool` itself for https. */
  readonly attempts: AttemptSender;
  readonly basePath: string;
}

/** Under the engines' own keep-alive (uvicorn's 5 s), so the router never reuses a socket the engine is closing. */
const KEEP_ALIVE_MS = 4_000;
const CONNECT_TIMEOUT_MS = 5_000;

export class UpstreamPools {
  private readonly pools = new Map<string, Upstream>();

  /** `engineCa`: the CA an https engine's certificate is checked against; null = the system's. */
  constructor(private readonly engineCa: Buffer | null) {}

  /** `nodeId`: the node serving the endpoint (rank 0), whose certificate an https engine must present; absent = the host is checked. */
  of(endpoint: string, nodeId?: string): Upstream {
    let up = this.pools.get(endpoint);
    if (!up) {
      const url = new URL(endpoint);
      const https = url.protocol === 'https:';
      const pool = new Pool(url.origin, {
        keepAliveTimeout: KEEP_ALIVE_MS,
        keepAliveMaxTimeout: KEEP_ALIVE_MS,
        connect: {
          timeout: CONNECT_TIMEOUT_MS,
          ...(https && this.engineCa ? { ca: this.engineCa } : {}),
          // Engines serve their node's certificate, which names the node and never loopback (a one-machine fleet's address).
          ...(https && nodeId !== undefined ? { checkServerIdentity: nodeIdentity(nodeId) } : {}),
        },
      });
      up = {
        pool,
        attempts: https
          ? pool
          : new EnginePool(url.origin, { keepAliveTimeoutMs: KEEP_ALIVE_MS, connectTimeoutMs: CONNECT_TIMEOUT_MS }),
        basePath: url.pathname.replace(/\/+$/, ''),
      };
      this.pools.set(endpoint, up);
    }
    return up;
  }

  /** Closes the pools of endpoints not in `live` that carry nothing. */
  sweep(live: ReadonlySet<string>): void {
    for (const [endpoint, up] of this.pools) {
      if (live.has(endpoint) || busy(up.pool) || busy(up.attempts)) continue;
      this.pools.delete(endpoint);
      void up.pool.close().catch(() => undefined);
      if (up.attempts !== up.pool) void up.attempts.close().catch(() => undefined);
    }
  }

  async close(): Promise<void> {
    const pools = [...this.pools.values()];
    this.pools.clear();
    await Promise.all(
      pools.flatMap((u) =>
        [u.pool, ...(u.attempts === u.pool ? [] : [u.attempts])].map((p) => p.destroy().catch(() => undefined)),
      ),
    );
  }
}

function busy(sender: { readonly stats: { readonly running: number; readonly pending: number } }): boolean {
  return sender.stats.running > 0 || sender.stats.pending > 0;
}
