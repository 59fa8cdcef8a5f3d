// What `llmgw gateway` runs once gateway.ts has read its flags: one gateway
// in this process, or, with --workers N (2 or more), a primary that runs no
// gateway itself: it forks N node:cluster workers that each build one and
// listen on the same port (the primary hands each new connection to the
// next worker), restarts a worker that dies with a growing backoff, forwards
// SIGTERM and SIGINT so each closes gracefully, and serves --metrics-addr
// with every worker's metrics summed. Apart from main.ts because the process
// model (primary and workers) is this command's own.
import cluster, { type Worker } from 'node:cluster';
import pino, { type Logger } from 'pino';
import { AggregatorRegistry, type Registry } from 'prom-client';
import { GatewayProcess, loadControlConfig, serveMetrics } from '../control/index.js';
import { parseAddress, type ControlConfig, type ListenAddress } from '../control/config/index.js';
import { Store } from '../control/store/index.js';
import { LlmgwError } from '../errors/index.js';
import { applyHeapGrowing, restartWithYoungGeneration, youngGenerationArgs } from './heap.js';

/** The most workers --workers takes: far beyond any host's cores, so a typo (--workers 800) is refused. */
const MAX_WORKERS = 256;
/** A worker that dies is started again after this, doubled for each death in a row, ms. */
const RESTART_FIRST_MS = 500;
/** The longest wait before starting a dead worker again, ms. */
const RESTART_MAX_MS = 30_000;
/** A worker that ran this long before dying starts its backoff afresh, ms. */
const RESTART_RESET_AFTER_MS = 60_000;
/** How long a worker may take to close gracefully after SIGTERM before the primary kills it, ms. */
const CLOSE_GRACE_MS = 30_000;

type WorkerMessage = { kind: 'listening'; url: string };

/**
 * Runs `llmgw gateway`: `opts` as commander read them (--config, --workers,
 * --metrics-addr), `flags` the control plane's keys among them by their
 * config names.
 */
export async function runGateway(
  opts: Record<string, string | undefined>,
  flags: Record<string, string>,
): Promise<void> {
  const workers = workerCount(opts.workers);
  // One process serves the requests itself; a primary only forks workers, each given the young generation as it starts.
  if (cluster.isPrimary && workers <= 1) restartWithYoungGeneration();
  const config = loadControlConfig({
    ...(opts.config === undefined ? {} : { file: opts.config }),
    env: process.env,
    flags,
  });
  const metricsAddr = metricsAddress(opts.metricsAddr);
  const logger = pino({ level: config.logLevel, base: { part: 'gateway' } });
  // The listening line is printed whatever the log level: scripts and tests wait for it.
  const announce = (fields: Record<string, unknown>) =>
    logger.child({}, { level: 'info' }).info({ ...fields, store: config.store.kind }, 'llmgw gateway listening');

  if (cluster.isWorker) return runWorker(config, logger, metricsAddr !== null);
  if (workers <= 1) {
    applyHeapGrowing(config.heapGrowingPercent);
    const gateway = await GatewayProcess.create(config, { logger });
    const client = await gateway.listen();
    const metrics = metricsAddr ? await serveMetrics(metricsAddr, logger, () => registryText(gateway.registry)) : null;
    announce({ client, metrics: metrics?.url ?? null, workers: [process.pid] });
    onStopSignal(logger, async () => {
      await metrics?.app.close();
      await gateway.close();
    });
    return;
  }
  await runPrimary(config, logger, workers, metricsAddr, announce);
}

function workerCount(text: string | undefined): number {
  if (text === undefined) return 1;
  if (!/^\d+$/.test(text) || Number(text) > MAX_WORKERS)
    throw new LlmgwError(
      'LLMGW_CONFIG_INVALID',
      `--workers ${text} is not a number of processes; want 0 to ${MAX_WORKERS} (0 or 1 = one gateway in this process)`,
    );
  return Math.max(1, Number(text));
}

function metricsAddress(text: string | undefined): ListenAddress | null {
  if (text === undefined) return null;
  const addr = parseAddress(text);
  if (!addr)
    throw new LlmgwError(
      'LLMGW_CONFIG_INVALID',
      `--metrics-addr ${text} is not host:port; want e.g. 127.0.0.1:9464 or [::1]:9464 (port 0 picks a free one)`,
    );
  return addr;
}

async function registryText(registry: Registry): Promise<{ contentType: string; text: string }> {
  return { contentType: registry.contentType, text: await registry.metrics() };
}

/** SIGINT or SIGTERM: `close`, then exit 0; a second signal while closing is ignored. */
function onStopSignal(logger: Logger, close: () => Promise<void>): void {
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'stopping');
    void close().then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ err }, 'closing failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

/** A worker: one gateway on the shared port; tells the primary when it listens, and closes when told or orphaned. */
async function runWorker(config: ControlConfig, logger: Logger, metrics: boolean): Promise<void> {
  applyHeapGrowing(config.heapGrowingPercent);
  const gateway = await GatewayProcess.create(config, { logger });
  if (metrics) {
    // Answers the primary's requests for this worker's metrics (prom-client's cluster protocol).
    new AggregatorRegistry();
    AggregatorRegistry.setRegistries([gateway.registry]);
  }
  const url = await gateway.listen();
  process.send?.({ kind: 'listening', url } satisfies WorkerMessage);
  const close = async () => gateway.close();
  onStopSignal(logger, close);
  // The primary is gone (killed outright): no one would restart or stop this worker, so it ends too.
  process.on('disconnect', () => void close().finally(() => process.exit(0)));
}

/** The primary: forks the workers, waits until all listen, restarts the ones that die, and stops them all on a signal. */
async function runPrimary(
  config: ControlConfig,
  logger: Logger,
  count: number,
  metricsAddr: ListenAddress | null,
  announce: (fields: Record<string, unknown>) => void,
): Promise<void> {
  // Once here, before any worker: the store is reachable and its schema current, so N workers do not each migrate it.
  if (config.store.kind !== 'none') await (await Store.open({ location: config.store })).close();
  // The workers serve the requests: each starts with the young generation they need unless the operator chose one.
  cluster.setupPrimary({ execArgv: youngGenerationArgs(process.execArgv, process.env.NODE_OPTIONS) });
  let stopping = false;
  const live = new Set<Worker>();
  let restartsInARow = 0;
  let lastStartMs = 0;

  const fork = (): Promise<{ worker: Worker; url: string }> => {
    const worker = cluster.fork();
    lastStartMs = Date.now();
    live.add(worker);
    return new Promise((resolve, reject) => {
      const onMessage = (message: WorkerMessage) => {
        if (message?.kind !== 'listening') return;
        worker.off('message', onMessage);
        resolve({ worker, url: message.url });
      };
      worker.on('message', onMessage);
      worker.once('exit', (code, signal) => {
        live.delete(worker);
        reject(new Error(`gateway worker ${worker.process.pid} exited (${signal ?? code}) before it listened`));
      });
    });
  };

  // A worker that dies after start is started again, later each time it happens in a row; so is one that fails to start.
  // The timer holds the primary up even when no worker is left to.
  const restartLater = () => {
    if (Date.now() - lastStartMs > RESTART_RESET_AFTER_MS) restartsInARow = 0;
    const waitMs = Math.min(RESTART_MAX_MS, RESTART_FIRST_MS * 2 ** restartsInARow++);
    setTimeout(() => {
      if (stopping) return;
      fork().then(
        ({ worker: next }) => {
          logger.info({ pid: next.process.pid }, 'gateway worker started again');
          watch(next);
        },
        (err: unknown) => {
          logger.error({ err: (err as Error).message }, 'a restarted gateway worker failed to start; trying again');
          restartLater();
        },
      );
    }, waitMs);
    return waitMs;
  };
  const watch = (worker: Worker) => {
    worker.once('exit', (code, signal) => {
      live.delete(worker);
      if (stopping) return;
      const waitMs = restartLater();
      logger.warn(
        { pid: worker.process.pid, code, signal, restart_in_ms: waitMs },
        'a gateway worker exited; starting another',
      );
    });
  };

  const stopAll = async () => {
    stopping = true;
    await Promise.all(
      [...live].map(
        (worker) =>
          new Promise<void>((resolve) => {
            if (worker.isDead()) return resolve();
            const kill = setTimeout(() => worker.process.kill('SIGKILL'), CLOSE_GRACE_MS);
            worker.once('exit', () => {
              clearTimeout(kill);
              resolve();
            });
            worker.process.kill('SIGTERM');
          }),
      ),
    );
  };

  let started: { worker: Worker; url: string }[];
  try {
    started = await Promise.all(Array.from({ length: count }, () => fork()));
  } catch (err) {
    // A worker that cannot start (a bad catalog file, a port in use) says why on its own stderr; the rest are stopped.
    await stopAll();
    throw new LlmgwError('LLMGW_GATEWAY_WORKER_FAILED', `${(err as Error).message}; its error is printed above`);
  }
  for (const { worker } of started) watch(worker);
  const aggregator = metricsAddr ? new AggregatorRegistry() : null;
  const metrics =
    metricsAddr && aggregator
      ? await serveMetrics(metricsAddr, logger, async () => ({
          contentType: aggregator.contentType,
          text: await aggregator.clusterMetrics(),
        }))
      : null;
  announce({
    client: started[0]!.url,
    metrics: metrics?.url ?? null,
    workers: started.map(({ worker }) => worker.process.pid),
  });
  onStopSignal(logger, async () => {
    await metrics?.app.close();
    await stopAll();
  });
}
