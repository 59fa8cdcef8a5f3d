// The interceptor that starts a request's shadow copy (src/gateway/traffic)
// once the client's own request has gone upstream: innermost in the attempt
// chain, so its `next` is the send to the replica's pool, and only at the
// first attempt, so a retry or a fallback is never copied twice. An attempt
// that goes out in another API's shape (a Responses request an engine
// serves natively) is not copied: the copy is made from the internal call.
import type { RoutedModel, RouterReplica } from '../ports/index.js';
import type { ShadowRunner } from '../traffic/index.js';
import type { Interceptor } from './dispatch.js';
import type { Upstream } from './upstreams.js';
import type { ParsedRequest } from './validate.js';

export function mirrorAfterSend(
  runner: ShadowRunner,
  pick: (model: RoutedModel, parsed: ParsedRequest) => { replica: RouterReplica; upstream: Upstream } | null,
): Interceptor {
  return (next) => (a) => {
    const plan = a.ex.shadow;
    if (!plan || plan.sentAt !== null) return next(a);
    const sent = next(a);
    if (a.passThrough || (a.ex.contentType !== undefined && a.ex.contentType !== 'application/json')) {
      // Not copied, and not tried again at a later attempt.
      plan.sentAt = performance.now();
      return sent;
    }
    runner.launch(plan, {
      id: a.ex.id,
      path: a.path,
      body: a.ex.parsed.body,
      stream: a.ex.parsed.stream,
      pick: (candidate) => pick(candidate, a.ex.parsed),
    });
    return sent;
  };
}
