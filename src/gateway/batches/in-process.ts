// The gateway's in-process entry point, for batch lines: a request the
// control plane's batch runner makes as a key it already resolved, sent
// through the client listener's own routes (Fastify's inject, no socket),
// so a line passes everything a client's request does: the body checks,
// the key's permission and limits, budgets, routing and fallbacks, the
// fair-share gate (at priority `batch`), usage and the request log.
//
// It is not reachable from the network. The key hook takes a request for
// one of these only when both hold: the request never came through a
// socket (light-my-request marks what inject made), and it carries the
// nonce of a call in progress here (256 random bits, kept in memory only
// for the call). A client that sends the header is checked as any other.
import { randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ApiKeyRecord } from '../ports/index.js';
import { PRIORITY_HEADER } from '../fair-share/index.js';

/** The header that carries a call's nonce into the key hook. */
export const IN_PROCESS_HEADER = 'x-llmgw-in-process';

/** What a call got back: the status, the headers and the whole body as text. */
export interface InProcessAnswer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | number | undefined>>;
  readonly body: string;
}

export class InProcessCalls {
  /** Calls in progress by nonce, with the key each runs as (null = the listener asks no key). */
  readonly #pending = new Map<string, ApiKeyRecord | null>();
  #app: FastifyInstance | null = null;

  /** The app whose routes calls go through (registerRouter's). */
  attach(app: FastifyInstance): void {
    this.#app = app;
  }

  /**
   * For the key hook: the key a request of a call in progress runs as, or
   * undefined when the request is not one (any request from a socket).
   */
  keyOf(request: FastifyRequest): ApiKeyRecord | null | undefined {
    const nonce = request.headers[IN_PROCESS_HEADER];
    if (typeof nonce !== 'string') return undefined;
    // What inject builds has this; a request read from a socket never does.
    if (!('_lightMyRequest' in request.raw)) return undefined;
    return this.#pending.has(nonce) ? this.#pending.get(nonce)! : undefined;
  }

  /** POSTs `body` (JSON) to `path` as `key`, at priority batch, and waits for the whole answer. */
  async post(key: ApiKeyRecord | null, path: string, body: unknown): Promise<InProcessAnswer> {
    if (!this.#app) throw new Error('in-process calls are not attached to a listener');
    const nonce = randomBytes(32).toString('hex');
    this.#pending.set(nonce, key);
    try {
      const res = await this.#app.inject({
        method: 'POST',
        url: path,
        headers: {
          host: 'localhost',
          'content-type': 'application/json',
          [IN_PROCESS_HEADER]: nonce,
          [PRIORITY_HEADER]: 'batch',
        },
        payload: JSON.stringify(body),
      });
      return { status: res.statusCode, headers: res.headers, body: res.body };
    } finally {
      this.#pending.delete(nonce);
    }
  }
}
