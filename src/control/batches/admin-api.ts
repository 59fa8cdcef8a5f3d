// The operator's view of batches on the admin listener: GET /api/v1/batches,
// GET /api/v1/batches/:id and POST /api/v1/batches/:id/cancel, what `ctl
// batches` and the dashboard's Batches page read. Every owner's batches (a
// team-admin: its teams' only), with progress, the rate so far, an estimated
// finish and, for a running batch, what the pace says of each of its models.
// Apart from the client listener's /v1/batches, which speaks OpenAI's shapes
// to the key that made a batch and nobody else.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { BatchAdminView, BatchesAdminView, BatchPaceView } from '../../api/batch-types.js';
import { LlmgwError } from '../../errors/index.js';
import { z } from 'zod';
import { needs, teamsInScope, type ZodTypeProvider } from '../../http/index.js';
import { CANCELLABLE_STATUSES, isActive, type BatchRepository, type BatchRow } from './batch-store.js';
import { progressOf } from './progress.js';

/** What the pace last said of a model, and its batch lines in flight from here. */
export interface PaceReport {
  readonly reason: BatchPaceView['reason'];
  readonly message: string;
  readonly inFlight: number;
}

export interface BatchesAdminDeps {
  readonly repo: BatchRepository;
  /** Epoch ms. */
  readonly now: () => number;
  /** The pace's last word on a model; absent (or undefined for a model) = none to show. */
  readonly pace?: (model: string) => PaceReport | undefined;
  /** Cancels the batch as the client listener's cancel does; returns it as it is after. Absent = the route answers 409. */
  readonly cancel?: (row: BatchRow) => Promise<BatchRow | undefined>;
}

/** The most batches one list answers; the newest first. */
export const BATCH_LIST_LIMIT = 200;

/** `deps` absent = batches cannot run here (no store, or no files_dir): the list is empty and an id is not found. */
export function registerBatchesAdminApi(app: FastifyInstance, deps: BatchesAdminDeps | undefined): void {
  const noBatches = (id: string) =>
    new LlmgwError(
      'LLMGW_NOT_FOUND',
      `no batch "${id}": this control plane runs no batches (it needs a store, and files_dir on Postgres)`,
    );
  app.get('/api/v1/batches', needs('batches.read'), async (request): Promise<BatchesAdminView> =>
    deps ? batchesView(deps, ownersInScope(request)) : { batches: [] },
  );
  const typed = app.withTypeProvider<ZodTypeProvider>();
  const params = z.object({ id: z.string() });
  typed.get(
    '/api/v1/batches/:id',
    { ...needs('batches.read'), schema: { params } },
    async (request): Promise<BatchAdminView> => {
      if (!deps) throw noBatches(request.params.id);
      return batchView(deps, await visible(deps, request, request.params.id));
    },
  );
  typed.post(
    '/api/v1/batches/:id/cancel',
    { ...needs('batches.write'), schema: { params } },
    async (request): Promise<BatchAdminView> => {
      if (!deps) throw noBatches(request.params.id);
      const row = await visible(deps, request, request.params.id);
      if (!deps.cancel) {
        throw new LlmgwError(
          'LLMGW_CONFLICT',
          'this control plane runs no batches (it has no store), so there is nothing to cancel',
        );
      }
      if (!(CANCELLABLE_STATUSES as readonly string[]).includes(row.status)) {
        throw new LlmgwError(
          'LLMGW_CONFLICT',
          `batch ${row.id} is ${row.status} already; only a validating or in_progress batch can be cancelled`,
        );
      }
      const after = (await deps.cancel(row)) ?? row;
      return batchView(deps, after);
    },
  );
}

/** Batches of these owners (null = every owner's), newest first, BATCH_LIST_LIMIT at most. */
export async function batchesView(deps: BatchesAdminDeps, owners: readonly string[] | null): Promise<BatchesAdminView> {
  const rows = await deps.repo.listAll(owners, BATCH_LIST_LIMIT);
  return { batches: await Promise.all(rows.map((r) => batchView(deps, r))) };
}

/** The owners a request may see: null = every one; a team-admin, its teams'. */
export function ownersInScope(request: FastifyRequest): string[] | null {
  const teams = teamsInScope(request);
  return teams === null ? null : teams.map((t) => `team:${t}`);
}

/** The batch when the request may see it; a 404 otherwise, the same for another team's as for none. */
async function visible(deps: BatchesAdminDeps, request: FastifyRequest, id: string): Promise<BatchRow> {
  const row = await deps.repo.get(id);
  const owners = ownersInScope(request);
  if (!row || (owners !== null && !owners.includes(row.owner))) {
    throw new LlmgwError(
      'LLMGW_NOT_FOUND',
      `no batch "${id}"${owners === null ? '' : ' of your teams'}; \`llmgw ctl batches\` lists them`,
    );
  }
  return row;
}

/** One batch as the admin API shows it: counts from its lines while it runs, from its row once it has ended. */
export async function batchView(deps: BatchesAdminDeps, row: BatchRow): Promise<BatchAdminView> {
  const now = deps.now();
  const active = isActive(row.status);
  let counts = { total: row.total, completed: row.completed, failed: row.failed, running: 0 };
  let models: string[] = [];
  if (active) {
    counts = await deps.repo.counts(row.id, now);
    models = await deps.repo.models(row.id);
  }
  const progress = progressOf({
    status: row.status,
    total: counts.total,
    completed: counts.completed,
    failed: counts.failed,
    startedAtMs: row.in_progress_at,
    nowMs: now,
  });
  const pace: BatchPaceView[] = [];
  if (active && deps.pace) {
    for (const model of models) {
      const p = deps.pace(model);
      if (p) pace.push({ model, reason: p.reason, message: p.message, in_flight: p.inFlight });
    }
  }
  return {
    id: row.id,
    owner: row.owner,
    key_id: row.key_id,
    endpoint: row.endpoint,
    models,
    status: row.status,
    total: counts.total,
    completed: counts.completed,
    failed: counts.failed,
    running: counts.running,
    created_at: row.created_at,
    started_at: row.in_progress_at,
    ended_at: row.completed_at ?? row.failed_at ?? row.expired_at ?? row.cancelled_at,
    expires_at: row.expires_at,
    lines_per_second: progress.linesPerSecond === null ? null : Math.round(progress.linesPerSecond * 100) / 100,
    estimated_finish_at: progress.estimatedFinishAtMs,
    ...(active && deps.pace ? { pace } : {}),
  };
}
