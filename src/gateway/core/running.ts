// The requests running now, and what may end one early: its client leaving,
// the total timeout, or its key being revoked. Each sets the exchange's flag
// and aborts or wakes whatever the request is doing (an upstream attempt, a
// cold hold, a queue, a backoff); the attempt loop reads the flags to answer.
// Apart from the router, which only opens and closes them, so the ways a
// request can be stopped are read in one place.
import type { Exchange } from './exchange.js';

/** Stops what the exchange is doing now; its flags say why. */
function interrupt(ex: Exchange): void {
  ex.abort?.();
  ex.wake?.();
}

export class RunningRequests {
  /** Requests running per key id; no entry = none. */
  private readonly byKey = new Map<string, Set<Exchange>>();

  /**
   * Watches `ex` until the returned function is called: its client leaving
   * and the total timeout (ms) end it, and so does a revocation of its key
   * (revoke()). `revokedAlready` marks a key revoked while the request was
   * being admitted, before it was here to be told.
   */
  open(ex: Exchange, totalTimeoutMs: number, revokedAlready: boolean): () => void {
    const res = ex.res;
    res.on('close', () => {
      if (res.writableFinished) return;
      ex.clientGone = true;
      interrupt(ex);
    });
    const total = setTimeout(() => {
      ex.timedOut = true;
      interrupt(ex);
    }, totalTimeoutMs);
    const key = ex.key;
    if (key) {
      let mine = this.byKey.get(key.id);
      if (!mine) this.byKey.set(key.id, (mine = new Set()));
      mine.add(ex);
      if (revokedAlready) ex.revoked = true;
    }
    return () => {
      clearTimeout(total);
      if (!key) return;
      const mine = this.byKey.get(key.id);
      mine?.delete(ex);
      if (mine?.size === 0) this.byKey.delete(key.id);
    };
  }

  /** Ends every running request of a key just revoked: within the time it takes this process to learn of it. */
  revoke(keyId: string): void {
    const mine = this.byKey.get(keyId);
    if (!mine) return;
    for (const ex of mine) {
      ex.revoked = true;
      interrupt(ex);
    }
  }
}
