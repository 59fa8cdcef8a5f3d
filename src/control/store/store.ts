// The control plane's persistent state as one object: the connection and a
// repository per kind of record, so a part takes `store` and reads
// `store.nodes`, `store.replicas`... Everything above it speaks in records,
// never in SQL, so the contract suite can run the same expectations against
// both dialects. No SQL lives here; it is in the repositories.
import { type LeaderFence, StoreConnection, type StoreOptions } from './connection.js';
import { AuditRepository } from './audit.js';
import { ControlPlaneRepository } from './control-planes.js';
import { EventRepository } from './events.js';
import { JoinTokenRepository } from './join-tokens.js';
import { LeadershipRepository } from './leadership.js';
import { ModelDemandRepository } from './model-demand.js';
import { ModelRepository } from './models.js';
import { NodeRepository } from './nodes.js';
import { RateCountRepository } from './rate-counts.js';
import { ReplicaUseRepository } from './replica-use.js';
import { ReplicaRepository } from './replicas.js';
import { ResponseRepository } from './responses.js';
import { ShardReportRepository } from './shard-reports.js';

export class Store {
  readonly models: ModelRepository;
  readonly nodes: NodeRepository;
  readonly joinTokens: JoinTokenRepository;
  readonly replicas: ReplicaRepository;
  readonly audit: AuditRepository;
  readonly events: EventRepository;
  /** Responses API responses kept for previous_response_id, per key, until their time to live. */
  readonly responses: ResponseRepository;
  // What several instances on one store tell each other through it. None of it is an
  // operator's state: losing any of it costs seconds, never a replica.
  readonly leadership: LeadershipRepository;
  readonly controlPlanes: ControlPlaneRepository;
  readonly shardReports: ShardReportRepository;
  readonly replicaUse: ReplicaUseRepository;
  readonly modelDemand: ModelDemandRepository;
  readonly rateCounts: RateCountRepository;

  private constructor(readonly connection: StoreConnection) {
    this.models = new ModelRepository(connection);
    this.nodes = new NodeRepository(connection);
    this.joinTokens = new JoinTokenRepository(connection);
    this.replicas = new ReplicaRepository(connection);
    this.audit = new AuditRepository(connection);
    this.events = new EventRepository(connection);
    this.responses = new ResponseRepository(connection);
    this.leadership = new LeadershipRepository(connection);
    this.controlPlanes = new ControlPlaneRepository(connection);
    this.shardReports = new ShardReportRepository(connection);
    this.replicaUse = new ReplicaUseRepository(connection);
    this.modelDemand = new ModelDemandRepository(connection);
    this.rateCounts = new RateCountRepository(connection);
  }

  /** Opens the store and brings its schema up to date. */
  static async open(options: StoreOptions): Promise<Store> {
    return new Store(await StoreConnection.open(options));
  }

  /** Fences replica and shard writes from now on (Postgres with several instances); null removes the fence. */
  setLeaderFence(fence: LeaderFence | null): void {
    this.connection.setLeaderFence(fence);
  }

  async close(): Promise<void> {
    await this.connection.close();
  }
}
