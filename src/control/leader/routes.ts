// GET /api/v1/control-planes: which instances share this store and which one
// leads the reconciler. With one instance (SQLite or no store) the answer is
// this instance alone, leading, with no epoch (there is no election).
import type { FastifyInstance } from 'fastify';
import type { ControlPlaneView } from '../../api/types.js';
import type { Cluster } from './cluster.js';
import { needs } from '../../http/index.js';

export interface ControlPlanesRouteOptions {
  /** Null: a single instance. */
  cluster: Cluster | null;
  now: () => number;
  /** This instance's admin URL once it listens; null before. */
  adminUrl: () => string | null;
}

export function registerControlPlanesRoute(app: FastifyInstance, options: ControlPlanesRouteOptions): void {
  app.get('/api/v1/control-planes', needs('fleet.read'), async (): Promise<ControlPlaneView[]> => {
    if (options.cluster) return options.cluster.controlPlanes();
    const address = options.adminUrl();
    return [
      {
        id: 'local',
        ...(address ? { address } : {}),
        is_leader: true,
        last_seen: new Date(options.now()).toISOString(),
        last_seen_seconds: 0,
        self: true,
      },
    ];
  });
}
