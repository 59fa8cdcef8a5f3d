// The gateway's connections to the engines: one keep-alive pool per replica
// endpoint, made on first use, closed by sweep() once no model lists the
// endpoint as ready and it carries nothing, destroyed on close(). Apart from
// the attempt loop so that count_tokens and the sweep reach the same pools.
import { Pool } from 'undici';
import { nodeIdentity } from '../../tls/index.js';

/** A replica endpoint's keep-alive pool and its path prefix ('' for a bare origin). */
export interface Upstream {
  readonly pool: Pool;
  readonly basePath: string;
}

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
      // keepAliveTimeout under the engines' own (uvicorn's 5 s), so the router never reuses a socket the engine is closing.
      up = {
        pool: new Pool(url.origin, {
          keepAliveTimeout: 4_000,
          keepAliveMaxTimeout: 4_000,
          connect: {
            timeout: 5_000,
            ...(https && this.engineCa ? { ca: this.engineCa } : {}),
            // Engines serve their node's certificate, which names the node and never loopback (a one-machine fleet's address).
            ...(https && nodeId !== undefined ? { checkServerIdentity: nodeIdentity(nodeId) } : {}),
          },
        }),
        basePath: url.pathname.replace(/\/+$/, ''),
      };
      this.pools.set(endpoint, up);
    }
    return up;
  }

  /** Closes the pools of endpoints not in `live` that carry nothing. */
  sweep(live: ReadonlySet<string>): void {
    for (const [endpoint, { pool }] of this.pools) {
      if (live.has(endpoint)) continue;
      const stats = pool.stats;
      if (stats.running > 0 || stats.pending > 0) continue;
      this.pools.delete(endpoint);
      void pool.close().catch(() => undefined);
    }
  }

  async close(): Promise<void> {
    const pools = [...this.pools.values()];
    this.pools.clear();
    await Promise.all(pools.map((u) => u.pool.destroy().catch(() => undefined)));
  }
}
