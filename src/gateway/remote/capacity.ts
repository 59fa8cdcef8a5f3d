// GET /v1/llmgw/capacity on the client listener: what a peer llmgw reads to
// route to this fleet as one more replica set (federation). Per model the
// key may use: its ready local replicas, and the requests they run and queue
// (the engines' last samples, or this gateway's own in-flight count where a
// replica reported none). Behind the same API key as inference, so a peer
// sees only the models its key may use. Remote replicas are left out: a
// peer routes to this fleet's engines, not through it to a third party.
import type { FastifyInstance } from 'fastify';
import { allows } from '../core/admission.js';
import { routeConfig } from '../core/dialect.js';
import { openai } from '../dialects/openai/index.js';
import type { ReplicaDirectory, ReplicaUse, RoutedModels } from '../ports/index.js';

/** One model's entry in the answer. */
export interface ModelCapacity {
  readonly id: string;
  /** Ready local replicas taking requests. */
  readonly ready: number;
  readonly running: number;
  readonly waiting: number;
}

export const CAPACITY_PATH = '/v1/llmgw/capacity';

export function registerCapacityRoute(
  scope: FastifyInstance,
  deps: { readonly catalog: RoutedModels; readonly replicas: ReplicaDirectory },
  use: { replicaUse(): Map<string, ReplicaUse> },
): void {
  scope.get(CAPACITY_PATH, { config: routeConfig(openai) }, async (request) => {
    const key = request.apiKey;
    const inFlight = use.replicaUse();
    const models: ModelCapacity[] = [];
    for (const m of deps.catalog.models()) {
      if (key && !allows(key, m)) continue;
      let ready = 0;
      let running = 0;
      let waiting = 0;
      for (const r of deps.replicas.ready(m.name)) {
        if (r.remote || r.draining) continue;
        ready++;
        if (r.load) {
          running += r.load.running;
          waiting += r.load.waiting;
        } else running += inFlight.get(r.id)?.inFlight ?? 0;
      }
      for (const id of [m.name, ...m.aliases]) models.push({ id, ready, running, waiting });
    }
    return { object: 'llmgw.capacity', models };
  });
}
