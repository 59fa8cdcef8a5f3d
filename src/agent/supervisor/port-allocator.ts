// Ports for engines, from a range the operator opened for them. A port is
// handed out only after binding it here succeeds, because the range is
// shared with everything else on the machine (an engine an earlier agent
// left behind, a user's notebook). Handed out round-robin rather than lowest
// first, so a port given back a moment ago is not reused while clients and
// sockets in TIME_WAIT still point at it.
import { createServer } from 'node:net';
import { LlmgwError } from '../../errors/index.js';

export interface PortAllocatorOptions {
  /** First port of the range, inclusive. Absent: 20000. */
  firstPort?: number;
  /** Last port of the range, inclusive. Absent: 20999. */
  lastPort?: number;
  /** Whether `port` can be bound on `host` now. Absent: bind it and close at once. Throws when the host itself is wrong. */
  isFree?: (host: string, port: number) => Promise<boolean>;
}

/** Binds `host:port` and lets go: false when something holds it, throws when the host cannot be bound at all. */
export function bindTest(host: string, port: number): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EADDRINUSE' || err.code === 'EACCES') resolve(false);
      else
        reject(
          new LlmgwError(
            'LLMGW_ENGINE_START_FAILED',
            `cannot bind ${host}:${port} to check it is free: ${err.code ?? err.message}; is ${host} an address of this machine?`,
            {
              cause: err,
              context: { host, port },
            },
          ),
        );
    });
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

export class PortAllocator {
  readonly firstPort: number;
  readonly lastPort: number;
  readonly #isFree: (host: string, port: number) => Promise<boolean>;
  /** Port → the shard holding it (including ports outside the range a shard asked for by number). */
  readonly #held = new Map<number, string>();
  #cursor: number;
  /** Allocations run one at a time, so the cursor walks the range once per call and the counts in an error are true. */
  #queue: Promise<unknown> = Promise.resolve();

  constructor(options: PortAllocatorOptions = {}) {
    this.firstPort = options.firstPort ?? 20000;
    this.lastPort = options.lastPort ?? 20999;
    const valid = (n: number) => Number.isInteger(n) && n >= 1 && n <= 65535;
    if (!valid(this.firstPort) || !valid(this.lastPort) || this.firstPort > this.lastPort) {
      throw new LlmgwError(
        'LLMGW_CONFIG_INVALID',
        `the engine port range ${this.firstPort}-${this.lastPort} is not valid; want two ports from 1 to 65535, the first not above the last`,
      );
    }
    this.#isFree = options.isFree ?? bindTest;
    this.#cursor = this.firstPort;
  }

  /**
   * A free port of the range for `holder`, checked by binding it on `host`.
   * Throws LLMGW_PORT_EXHAUSTED when every port is held or taken.
   */
  allocate(holder: string, host: string): Promise<number> {
    const next = this.#queue.then(() => this.#allocate(holder, host));
    this.#queue = next.catch(() => undefined);
    return next;
  }

  async #allocate(holder: string, host: string): Promise<number> {
    const size = this.lastPort - this.firstPort + 1;
    let takenElsewhere = 0;
    for (let i = 0; i < size; i++) {
      const port = this.#cursor;
      this.#cursor = port === this.lastPort ? this.firstPort : port + 1;
      if (this.#held.has(port)) continue;
      // Held while it is checked, so a concurrent allocate cannot pick it too.
      this.#held.set(port, holder);
      let free: boolean;
      try {
        free = await this.#isFree(host, port);
      } catch (err) {
        this.#held.delete(port);
        throw err;
      }
      if (free) return port;
      this.#held.delete(port);
      takenElsewhere++;
    }
    const heldHere = [...this.#held.keys()].filter((p) => p >= this.firstPort && p <= this.lastPort).length;
    throw new LlmgwError(
      'LLMGW_PORT_EXHAUSTED',
      `no free port in ${this.firstPort}-${this.lastPort} for shard ${holder}: ${heldHere} held by engines of this agent, ${takenElsewhere} taken by other processes; widen the agent's engine port range or stop something`,
      { context: { firstPort: this.firstPort, lastPort: this.lastPort, heldHere, takenElsewhere } },
    );
  }

  /** Marks a known port as `holder`'s (an adopted engine, a port given by number). False when another shard holds it. */
  claim(port: number, holder: string): boolean {
    const current = this.#held.get(port);
    if (current !== undefined && current !== holder) return false;
    this.#held.set(port, holder);
    return true;
  }

  /** Gives `port` back; a no-op unless `holder` holds it, so a late release cannot free a successor's port. */
  release(port: number, holder: string): void {
    if (this.#held.get(port) === holder) this.#held.delete(port);
  }

  holderOf(port: number): string | undefined {
    return this.#held.get(port);
  }

  /** Whether `port` is free on `host` right now (for a restart that wants to keep its port). */
  isFree(host: string, port: number): Promise<boolean> {
    return this.#isFree(host, port);
  }
}
