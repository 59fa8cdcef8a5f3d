// The one place that decides about the stream_options the gateway adds to a
// stream (`include_usage`, so that a stream's tokens are counted even when
// its client did not ask for them). An engine that forbids unknown fields
// refuses the request with a 400 or 422 naming the field: the relay that
// reads such a refusal (whichever dialect it writes) asks refusesStreamOptions,
// and the interceptor below sends the attempt again, to the same replica, as
// the client wrote it. Apart from the relays and the attempt loop so that
// neither carries a copy of the rule or of the field's name.
import type { Logger } from 'pino';
import { withholdsUsage, type Attempt, type AttemptExchange, type Dispatch, type Interceptor } from './dispatch.js';
import type { Outcome } from './relay.js';

/** The field's name as it appears in an engine's refusal. */
const STREAM_OPTIONS = Buffer.from('stream_options');

/**
 * Whether a whole answer refuses the stream_options the gateway added:
 * only when it asked (`askedUsage`), and only a 400 or 422 that names the
 * field. False for anything else, which reaches the client as it came.
 */
export function refusesStreamOptions(askedUsage: boolean, status: number, body: Buffer): boolean {
  return askedUsage && (status === 400 || status === 422) && body.includes(STREAM_OPTIONS);
}

/**
 * Sends an attempt whose engine refused stream_options once more, to the
 * same replica, with the body as the interceptors after this one make it
 * now that `usageRefused` is set (so without the field); its tokens are then
 * counted at lower bounds. Outermost in the chain: the re-send is a new
 * upstream request (the body rewritten again, its own request id, in-flight
 * count and send time), and the attempt loop sees one attempt. A second refusal cannot
 * come (the field is not sent); were it to, it reads as a failed attempt.
 */
export function streamOptionsResend(logger: Logger): Interceptor {
  return (next) => (a) => {
    // Only an attempt whose stream the gateway asks for its usage can be refused for it: the rest pass as they are.
    if (a.passThrough || !withholdsUsage(a.ex)) return next(a);
    return resend(next, a, logger);
  };
}

async function resend<E extends AttemptExchange>(next: Dispatch<E>, a: Attempt<E>, logger: Logger): Promise<Outcome> {
  const body = a.body;
  const outcome = await next(a);
  if (outcome.kind !== 'usageRefused') return outcome;
  logger.warn(
    { model: a.model.name, replica: a.replica.id, request: a.ex.id },
    'the engine refused stream_options; this stream is sent without it and its tokens are counted at lower bounds',
  );
  a.ex.usageRefused = true;
  a.body = body;
  const again = await next(a);
  return again.kind === 'usageRefused' ? { kind: 'retry', reason: 'the engine refused stream_options' } : again;
}
