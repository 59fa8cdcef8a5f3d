// The attempt-level guard around a remote replica: its 429 moves the request
// on (the remote is left alone until its Retry-After) instead of reaching
// the client, its silence past the remote's own timeout is a 504 if nothing
// else answers, and every attempt's end feeds the remote's circuit. A local
// engine's attempts pass untouched. Separate from the relays: they write
// bytes for a dialect; this decides about a remote before any byte is written.
import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import type { Interceptor } from '../core/dispatch.js';
import type { Outcome, RelayTarget } from '../core/relay.js';
import type { RouterReplica } from '../ports/index.js';
import type { RemoteCircuits } from './circuit.js';

/**
 * `inner` (the dialect's relay) behind the guard when `replica` is remote;
 * `inner` itself otherwise. `resolve` is the attempt's: the guard settles a
 * 429 or a hang itself, and the inner relay's later settle is a no-op.
 */
export function guardRemote(
  inner: Dispatcher.DispatchHandler,
  replica: RouterReplica,
  circuits: RemoteCircuits,
  target: RelayTarget,
  resolve: (o: Outcome) => void,
): Dispatcher.DispatchHandler {
  if (!replica.remote) return inner;
  let diverted = false;
  const timeoutMs = replica.remote.timeoutMs;
  return {
    onRequestStart: (controller, context) => inner.onRequestStart?.(controller, context),
    onResponseStart(controller, statusCode: number, headers: IncomingHttpHeaders, statusMessage?: string) {
      if (statusCode === 429 && !target.clientGone && !target.timedOut && !target.revoked) {
        diverted = true;
        const header = headers['retry-after'];
        const waitMs = circuits.limited(replica.id, typeof header === 'string' ? header : undefined);
        const retryAfterS = Math.max(1, Math.ceil(waitMs / 1000));
        target.abort = null;
        resolve({
          kind: 'retry',
          reason: `the remote answered 429; it is not chosen again for ${retryAfterS} s`,
          refusal: { status: 429, retryAfterS },
        });
        controller.abort(new Error('the remote asked to be left alone (429)'));
        return;
      }
      inner.onResponseStart?.(controller, statusCode, headers, statusMessage);
    },
    onResponseData(controller, chunk: Buffer) {
      if (!diverted) inner.onResponseData?.(controller, chunk);
    },
    onResponseEnd(controller, trailers: IncomingHttpHeaders) {
      if (!diverted) inner.onResponseEnd?.(controller, trailers);
    },
    onResponseError(controller, err: Error) {
      if (diverted) return;
      const code = (err as { code?: string }).code;
      if (code === 'UND_ERR_HEADERS_TIMEOUT' && !target.clientGone && !target.timedOut && !target.revoked) {
        // Settled here first so the 504 is known; the inner relay still cleans up (its settle is then a no-op).
        resolve({
          kind: 'retry',
          reason: `the remote sent no answer within ${timeoutMs > 0 ? `${timeoutMs} ms` : 'the headers timeout'}`,
          refusal: { status: 504 },
        });
      }
      inner.onResponseError?.(controller, err);
    },
  };
}

/**
 * Feeds each remote attempt's end to its circuit: an answer below 500
 * closes it, a failure before the first byte (refused, reset, hung, 502/503)
 * or a 5xx answer counts toward opening it; a 429 is neither (the guard
 * recorded its wait). Local replicas' attempts pass untouched.
 */
export function circuitOutcomes(circuits: RemoteCircuits): Interceptor {
  return (next) => (a) => {
    if (!a.replica.remote) return next(a);
    const id = a.replica.id;
    circuits.started(id);
    return next(a).then((o) => {
      if (o.kind === 'retry') {
        if (o.refusal?.status !== 429) circuits.failed(id);
      } else if (o.kind === 'done' && o.status >= 500) circuits.failed(id);
      else if (o.kind === 'done' && o.status !== 0) circuits.succeeded(id);
      else circuits.abandoned(id);
      return o;
    });
  };
}
