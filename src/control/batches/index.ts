// Batches on the fleet (docs/batches.md): the Files and Batch APIs' store
// and service, and the runner that runs lines through the gateway. Opened by
// the control plane in two steps, because the client listener needs the
// service (its routes) and the runner needs the listener's router (its
// in-process entry point).
import type { Logger } from 'pino';
import type { ApiKeyRecord, Router } from '../../gateway/index.js';
import type { BatchSettings } from '../config/batches.js';
import type { Store } from '../store/index.js';
import type { TeamKeys } from '../teams/index.js';
import { BatchRepository } from './batch-store.js';
import { FileContent } from './content.js';
import { FileRepository } from './files-store.js';
import { BatchRunner, type BatchPace } from './runner.js';
import { BatchService, type BatchServiceDeps } from './service.js';
import { sweepFiles } from './sweep.js';

export { BatchRepository } from './batch-store.js';
export { FileRepository } from './files-store.js';
export { BatchRunner, type BatchPace, type LineCall } from './runner.js';
export { BatchService } from './service.js';

export interface Batches {
  readonly service: BatchService;
  /** The store's batches and lines, for the admin API and the dashboard (surfaces.ts): the same the service writes. */
  readonly repo: BatchRepository;
  /** Starts the runner over the router's in-process entry point, paced by `pace` (pace.ts) over its own in-flight count. */
  run(router: Router, pace: (inFlight: (model: string) => number) => BatchPace): Promise<void>;
  close(): Promise<void>;
}

/** Null when batches cannot run here: no store, or no files directory (Postgres without files_dir). */
export function openBatches(deps: {
  store: Store | null;
  settings: BatchSettings;
  /** The keys as the gateway sees them: each narrowed by its team, so a batch line has its team's limits too. */
  keys: TeamKeys;
  /** Lines are stored under the model's name, not an alias (service.ts); absent = as the input names them. */
  catalog?: BatchServiceDeps['catalog'];
  now: () => number;
  logger: Logger;
}): Batches | null {
  const { store, settings } = deps;
  if (!store || settings.filesDir === null) return null;
  const repo = new BatchRepository(store.connection);
  const files = new FileRepository(store.connection);
  const content = new FileContent(settings.filesDir);
  let runner: BatchRunner | null = null;
  const service = new BatchService({
    files,
    batches: repo,
    content,
    settings,
    now: deps.now,
    notify: () => runner?.notify(),
    ...(deps.catalog ? { catalog: deps.catalog } : {}),
  });
  return {
    service,
    repo,
    async run(router, pace) {
      const byId = new Map<string, ApiKeyRecord>();
      const keyOf = async (id: string): Promise<ApiKeyRecord | undefined> => {
        if (!byId.has(id)) for (const k of await deps.keys.list()) byId.set(k.id, k);
        const key = byId.get(id);
        return key && deps.keys.narrow(key);
      };
      const made: BatchRunner = new BatchRunner({
        batches: repo,
        content,
        pace: pace((m) => made.inFlight(m)),
        call: async (keyId, path, body) => {
          if (keyId === 'anonymous') return router.inProcess.post(null, path, body);
          const key = await keyOf(keyId);
          if (!key)
            return {
              status: 401,
              headers: {},
              body: JSON.stringify({
                error: { message: "the batch's API key no longer exists", code: 'invalid_api_key' },
              }),
            };
          // The key as the store has it now (revoked, its limits changed; its team's at once): read again every few seconds.
          return router.inProcess.post(key, path, body);
        },
        leaseMs: settings.leaseMs,
        now: deps.now,
        logger: deps.logger,
        alone: store.connection.dialect === 'sqlite',
      });
      runner = made;
      const refresh = setInterval(() => byId.clear(), 5000).unref();
      const stop = made.stop.bind(made);
      made.stop = async () => {
        clearInterval(refresh);
        await stop();
      };
      // Before this runner writes: what a crash left in files_dir goes, and none of its own output is mistaken for it.
      await sweepFiles({
        dir: content.dir,
        named: (ids) => files.existing(ids),
        now: deps.now,
        logger: deps.logger,
      }).catch((err: unknown) => deps.logger.warn({ err }, 'could not sweep files_dir of files no row names'));
      await made.start();
    },
    async close() {
      await runner?.stop();
    },
  };
}
