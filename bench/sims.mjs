// Sim engines and the gateway in front of them, as the benches start them.
// Every bench that measures routing on sims needs the same two things: sims
// in a process of their own (so their pacing does not share the gateway's
// event loop), and the gateway in the bench's process, built as the control
// plane builds its client listener. They live here once, so a change to how
// either starts reaches every bench.
//
// Run as a program, this file is the sims' child process:
//   node bench/sims.mjs --dist <dist dir> --serve '<JSON specs>'
// It prints the sims' URLs as one JSON line and runs until SIGTERM or until
// its parent's end of stdin closes (the parent exited, however it exited).
// Node's globals are imported by name: the lint config gives plain .mjs files no Node environment.
import { spawn } from 'node:child_process';
import console from 'node:console';
import { resolve } from 'node:path';
import process from 'node:process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

/** This checkout's dist/, which the benches run unless told another build's (`--dist`). */
export const DEFAULT_DIST = fileURLToPath(new URL('../dist/', import.meta.url));

/** Maps a path under a dist directory to an importable URL. */
export function distOf(dir = DEFAULT_DIST) {
  const root = resolve(dir);
  return (path) => pathToFileURL(`${root}/${path}`).href;
}

/**
 * Starts sims in a child process. `specs` is either an array of
 * startSimEngine options (one sim each; the answer's `urls` is an array in
 * the same order) or an object of them by name (`urls` is an object by the
 * same names). Each spec names its own `models`; `shutdownGraceMs` is 0
 * unless a spec says otherwise. `stop()` ends the child (it also ends when
 * this process does).
 */
export async function startSims(specs, { distDir = DEFAULT_DIST } = {}) {
  const child = spawn(
    process.execPath,
    [fileURLToPath(import.meta.url), '--dist', resolve(distDir), '--serve', JSON.stringify(specs)],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const line = await new Promise((resolvePromise, reject) => {
    let text = '';
    child.stdout.on('data', (d) => {
      text += d;
      if (text.includes('\n')) resolvePromise(text.split('\n')[0]);
    });
    child.once('exit', (code) => reject(new Error(`the sims exited with ${code}`)));
  });
  return { urls: JSON.parse(line), stop: () => child.kill('SIGTERM') };
}

/** Child mode: starts every sim of `specs` (array or object by name) and prints their URLs in the same shape. */
async function serveSims(specs, dist) {
  const { startSimEngine } = await import(dist('engine/sim/index.js'));
  const start = async (options) => (await startSimEngine({ shutdownGraceMs: 0, ...options })).url;
  let urls;
  if (Array.isArray(specs)) {
    urls = [];
    for (const options of specs) urls.push(await start(options));
  } else {
    urls = {};
    for (const [name, options] of Object.entries(specs)) urls[name] = await start(options);
  }
  console.log(JSON.stringify(urls));
  process.on('SIGTERM', () => process.exit(0));
  process.stdin.on('end', () => process.exit(0));
  process.stdin.resume();
}

/** The running and waiting counts a sim's /metrics reports (vLLM's names), summed over its models. */
export async function engineLoad(url) {
  const text = await (await fetch(`${url}/metrics`)).text();
  const read = (name) => {
    let n = 0;
    for (const m of text.matchAll(new RegExp(`^vllm:${name}\\{[^}]*\\} (\\d+)`, 'gm'))) n += Number(m[1]);
    return n;
  };
  return { running: read('num_requests_running'), waiting: read('num_requests_waiting') };
}

/**
 * The gateway in this process, as the control plane builds its client
 * listener. `models` are catalog entries as a config file writes them
 * (name, source and a sim profile are filled in when absent); `ready(name)`
 * gives a model's replicas at the moment of asking. `keys` (team name ->
 * key name) issues one key per team and turns authentication on; absent,
 * the gateway asks for none. `router` adds to or overrides registerRouter's
 * options (a request log, batches, timeouts): an object, or a function of
 * `{ keyStore, registry, logger }` for options built on them. Answers the listener's URL,
 * the issued secrets by team, the router, its metrics registry, the key
 * store, the compiled models and `stop()`.
 */
export async function startGateway({ dist = distOf(), models, ready, keys, router: extra = {} }) {
  const { createJsonApp } = await import(dist('http/index.js'));
  const { compileModel, ModelSchema } = await import(dist('control/catalog/index.js'));
  const { registerRouter, openAiErrorShape } = await import(dist('gateway/index.js'));
  const { MemoryKeyStore, MemoryUsageSink, issueKey } = await import(dist('control/keys/index.js'));
  const { Registry } = await import('prom-client');
  const { default: pino } = await import('pino');
  const logger = pino({ level: 'silent' });
  const compiled = new Map(
    models.map((m) => [
      m.name,
      compileModel(
        ModelSchema.parse({ source: `file:///models/${m.name}`, profiles: [{ engine: 'sim' }], ...m }),
        'file',
      ),
    ]),
  );
  const keyStore = new MemoryKeyStore();
  const secrets = {};
  for (const [team, name] of Object.entries(keys ?? {}))
    secrets[team] = (await issueKey(keyStore, { name, team }, Date.now(), 'bench')).secret;
  const app = createJsonApp({
    logger,
    bodyLimitBytes: 8 << 20,
    shapeError: openAiErrorShape,
    requestLoggers: false,
    requestIds: true,
  });
  const registry = new Registry();
  const more = typeof extra === 'function' ? await extra({ keyStore, registry, logger }) : extra;
  const router = registerRouter(app, {
    catalog: { resolve: (n) => compiled.get(n), models: () => [...compiled.values()] },
    replicas: { ready, describe: () => 'none', demand: () => false },
    keys: keyStore,
    authRequired: keys !== undefined,
    usage: new MemoryUsageSink(),
    registry,
    logger,
    ...more,
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  return {
    url: `http://127.0.0.1:${app.server.address().port}`,
    keys: secrets,
    router,
    registry,
    keyStore,
    models: compiled,
    logger,
    stop: () => app.close(),
  };
}

// Run as a program: the sims' child process.
if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({ options: { dist: { type: 'string' }, serve: { type: 'string' } } });
  await serveSims(JSON.parse(values.serve), distOf(values.dist));
}
