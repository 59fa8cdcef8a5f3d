// `llmgw up`: the quick start. A control plane and one agent for this machine
// in one process, embedded SQLite in the data directory, and a demo model
// llmgw makes itself (a tiny GGUF on the builtin CPU engine), so a newcomer
// sees a real chat completion in seconds with no GPU, Python or download.
// Secrets are made on the first run and kept (owner-only) in the data dir,
// where `llmgw ctl` finds them. Ctrl-C stops everything it started.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import pino from 'pino';
import { ControlPlane, compileControlOptions } from '../control/index.js';
import { upPointerPath, type UpPointer } from '../ctl/connection.js';
import { CONTROL_DEFAULTS } from '../control/config/index.js';
import { makeTinyModel } from '../dev/make-model/index.js';
import { readGgufModelFacts } from '../engine/builtin/gguf-check.js';
import { childLogger } from '../log/index.js';
import { startAgent } from './agent.js';
import { CLI_DEFAULTS } from './defaults.js';
import { applyHeapGrowing, restartWithYoungGeneration } from './heap.js';

/** `llmgw up`'s flags; absent = CLI_DEFAULTS.up.dataDir, and the control plane's own defaults for the rest. */
export interface UpFlags {
  dataDir?: string;
  clientAddr?: string;
  adminAddr?: string;
  agentAddr?: string;
  logLevel?: string;
}

/** The files `llmgw up` keeps in its data directory; `llmgw ctl` reads `control.json` and `admin-token`. */
export const UP_FILES = {
  adminToken: 'admin-token',
  joinToken: 'join-token',
  apiKey: 'api-key',
  control: 'control.json',
  catalog: 'catalog.yaml',
  log: 'llmgw.log',
} as const;

/**
 * Tokens the demo model declares as its context; the builtin engine gives each
 * sequence that much (its default cap), at whatever sequence count it picks.
 * Clients' tool and structured-output prompts run 900-1,000 tokens on the
 * demo's byte-level vocabulary, and agents send more; 256 refused them all.
 * The KV cache this costs is about 0.5 KB a token: 2 MB a sequence.
 */
export const DEMO_CONTEXT_TOKENS = 4096;

function secretFile(path: string): { value: string; created: boolean } {
  if (existsSync(path)) return { value: readFileSync(path, 'utf8').trim(), created: false };
  const value = randomBytes(24).toString('base64url');
  writeFileSync(path, `${value}\n`, { mode: 0o600 });
  return { value, created: true };
}

function demoCatalog(modelPath: string): string {
  return `# llmgw up's catalog. Models here are read at start; add more with
#   llmgw ctl models add FILE.yaml     (kept in the store, not in this file)
models:
  # A tiny model llmgw generated itself: gibberish, but real inference through
  # the real loading code, on the builtin CPU engine. Ready in seconds.
  # Each request may use ${DEMO_CONTEXT_TOKENS} tokens, prompt and reply together. For more, give
  # the engine a context (shared by its sequences) and a sequence count, e.g.
  #   - { name: cpu, engine: builtin, memory_gb: 1, args: [--ctx-size, '16384', --parallel, '2'] }
  - name: demo
    source: file://${modelPath}
    scaling: { min: 1 }
    profiles:
      - { name: cpu, engine: builtin, memory_gb: 1 }

  # A real small model on CPU (about 400 MB, fetched from Hugging Face):
  # - name: qwen2.5-0.5b
  #   source: hf://Qwen/Qwen2.5-0.5B-Instruct-GGUF/qwen2.5-0.5b-instruct-q4_k_m.gguf
  #   profiles:
  #     - { engine: builtin, memory_gb: 2, disk_gb: 0.5 }
  #     - { engine: llamacpp, gpus: 1 }
  #
  # A tensor-parallel model on two GPUs of one node with vLLM:
  # - name: qwen2.5-32b
  #   source: hf://Qwen/Qwen2.5-32B-Instruct
  #   scaling: { min: 1, max: 4, idle_timeout: 15m }
  #   profiles:
  #     - { name: h100-tp2, engine: vllm, gpus: 2, gpu_classes: [h100-80gb], gpu_memory_gb: 70, disk_gb: 66 }
`;
}

export async function runUp(flags: UpFlags): Promise<void> {
  restartWithYoungGeneration();
  const dataDir = resolve(flags.dataDir ?? CLI_DEFAULTS.up.dataDir);
  const logLevel = flags.logLevel ?? CONTROL_DEFAULTS.log_level;
  mkdirSync(join(dataDir, 'models'), { recursive: true, mode: 0o700 });
  const say = (line: string) => process.stderr.write(`${line}\n`);
  const admin = secretFile(join(dataDir, UP_FILES.adminToken));
  const join_ = secretFile(join(dataDir, UP_FILES.joinToken));

  const modelPath = join(dataDir, 'models', 'demo.gguf');
  if (await demoModelWanted(modelPath)) {
    say('making the demo model (a tiny GGUF with seeded random weights)…');
    await makeTinyModel(modelPath, { seed: 1, contextLength: DEMO_CONTEXT_TOKENS });
  }
  const catalogPath = join(dataDir, UP_FILES.catalog);
  if (!existsSync(catalogPath)) writeFileSync(catalogPath, demoCatalog(modelPath));

  const logger = pino(
    { level: logLevel, base: { part: 'up' } },
    pino.destination({ dest: join(dataDir, UP_FILES.log), mkdir: true, sync: false }),
  );
  const config = compileControlOptions({
    // Absent ones take CONTROL_DEFAULTS' addresses in the compile step.
    ...(flags.clientAddr === undefined ? {} : { client_addr: flags.clientAddr }),
    ...(flags.adminAddr === undefined ? {} : { admin_addr: flags.adminAddr }),
    ...(flags.agentAddr === undefined ? {} : { agent_addr: flags.agentAddr }),
    store: `sqlite:${join(dataDir, 'llmgw.db')}`,
    catalog: catalogPath,
    admin_token: admin.value,
    join_token: join_.value,
    log_level: logLevel,
    reconcile_interval: CLI_DEFAULTS.up.reconcileInterval,
  });
  applyHeapGrowing(config.heapGrowingPercent);
  const plane = await ControlPlane.create(config, { logger: childLogger(logger, 'control') });
  const urls = await plane.listen();
  const apiKey = await firstApiKey(plane, join(dataDir, UP_FILES.apiKey), admin.value);
  writeFileSync(
    join(dataDir, UP_FILES.control),
    `${JSON.stringify({ admin_url: urls.admin, client_url: urls.client, agent_url: urls.agent }, null, 2)}\n`,
    { mode: 0o600 },
  );
  const pointer = writeUpPointer(process.env, { pid: process.pid, data_dir: dataDir, admin_url: urls.admin }, say);

  const { agent, supervisor } = await startAgent(
    {
      control: urls.agent,
      joinToken: join_.value,
      stateDir: join(dataDir, 'agent'),
      logLevel,
      // Engines on loopback in AGENT_DEFAULTS' port range, as `llmgw agent` with no flags.
      heartbeatInterval: CLI_DEFAULTS.up.heartbeatInterval,
    },
    logger,
  );

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    say(`\n${signal}: stopping the agent, its engines and the control plane…`);
    // Unlike `llmgw agent`, up owns its engines: nothing it started may outlive it.
    void (async () => {
      await agent.stop();
      await supervisor.stop();
      await plane.close();
      removeUpPointer(pointer, process.pid);
      logger.flush();
      process.exit(0);
    })();
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));

  await showProgress(plane, say);
  say('');
  say(`llmgw is up. Data, secrets and logs: ${dataDir}`);
  say(`  OpenAI-compatible endpoint  ${urls.client}/v1`);
  say(`  admin API and dashboard     ${urls.admin}   (admin token in ${join(dataDir, UP_FILES.adminToken)})`);
  if (admin.created) say(`  admin token                 ${admin.value}`);
  say(
    `  API key                     ${apiKey.value}${apiKey.created ? '' : `   (from ${join(dataDir, UP_FILES.apiKey)})`}`,
  );
  say('');
  say(
    `  curl ${urls.client}/v1/chat/completions -H "authorization: Bearer ${apiKey.value}" -H 'content-type: application/json' \\`,
  );
  say(`    -d '{"model": "demo", "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 16}'`);
  say('');
  say('Ctrl-C stops everything.');
  logger.info({ client: urls.client, admin: urls.admin }, 'llmgw up ready');
  process.stdout.write(
    `${JSON.stringify({ msg: 'llmgw up ready', client: urls.client, admin: urls.admin, data_dir: dataDir, api_key_file: join(dataDir, UP_FILES.apiKey) })}\n`,
  );
}

/**
 * Leaves the pointer `llmgw ctl` reads when run outside the directory that
 * holds the data dir (src/ctl/connection.ts upPointerPath). A later `llmgw up`
 * takes it over; ctl ignores one whose process is gone. Returns its path, or
 * null when it could not be written (no HOME, a read-only home): up then
 * works as before, and ctl finds it from the data dir's parent only.
 */
export function writeUpPointer(env: NodeJS.ProcessEnv, pointer: UpPointer, say: (line: string) => void): string | null {
  const path = upPointerPath(env);
  if (path === null) return null;
  try {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    writeFileSync(path, `${JSON.stringify(pointer, null, 2)}\n`, { mode: 0o600 });
    return path;
  } catch (err) {
    say(
      `could not write ${path} (${(err as NodeJS.ErrnoException).code ?? String(err)}); \`llmgw ctl\` finds this llmgw up only with --data-dir ${pointer.data_dir}`,
    );
    return null;
  }
}

/** Removes the pointer on a clean stop, unless a later `llmgw up` has taken it over. */
export function removeUpPointer(path: string | null, pid: number): void {
  if (path === null) return;
  try {
    if ((JSON.parse(readFileSync(path, 'utf8')) as Partial<UpPointer>).pid === pid) rmSync(path, { force: true });
  } catch {
    // Gone or unreadable: nothing of ours to remove.
  }
}

/**
 * Whether to (re)make the demo model: it is absent, or an earlier version of
 * llmgw made it with a context too small for tools (256 tokens), which an
 * existing data dir would otherwise keep for ever. Unreadable = remake: the
 * file is llmgw's own, made from a seed.
 */
export async function demoModelWanted(path: string): Promise<boolean> {
  if (!existsSync(path)) return true;
  try {
    return (await readGgufModelFacts(path)).trainedContextTokens < DEMO_CONTEXT_TOKENS;
  } catch {
    return true;
  }
}

/**
 * The API key `up` made on its first run, kept owner-only in the data dir. It
 * is made through the admin API in process, so it is audited like any other.
 */
async function firstApiKey(
  plane: ControlPlane,
  path: string,
  adminToken: string,
): Promise<{ value: string; created: boolean }> {
  if (existsSync(path)) return { value: readFileSync(path, 'utf8').trim(), created: false };
  const res = await plane.adminApp.inject({
    method: 'POST',
    url: '/api/v1/keys',
    headers: { authorization: `Bearer ${adminToken}`, 'x-llmgw-actor': 'llmgw up' },
    payload: { name: 'llmgw up' },
  });
  if (res.statusCode !== 201) throw new Error(`could not create the first API key: ${res.body}`);
  const { secret } = res.json<{ secret: string }>();
  writeFileSync(path, `${secret}\n`, { mode: 0o600 });
  return { value: secret, created: true };
}

/** Prints each change of the demo model's replica state until it is ready (or failed), so a slow load is visible. */
async function showProgress(plane: ControlPlane, say: (line: string) => void): Promise<void> {
  const startedMs = Date.now();
  let last = '';
  for (;;) {
    const replica = plane.reconciler.replicas().find((r) => r.model === 'demo');
    // Ready means routed to: a state read back from the store after a restart is not, until the agent confirms it.
    const serving = replica?.state === 'ready' && plane.reconciler.view.ready('demo').some((r) => r.id === replica.id);
    const state = !replica
      ? 'waiting for placement'
      : replica.state === 'ready' && !serving
        ? 'ready when it stopped; waiting for the agent to confirm its engine'
        : replica.state;
    if (state !== last) {
      say(
        `demo: ${state}${replica?.error ? ` (${replica.error})` : ''}  [${((Date.now() - startedMs) / 1000).toFixed(1)}s]`,
      );
      last = state;
    }
    if (serving) return;
    if (Date.now() - startedMs > 120_000) {
      say('demo: still not ready after 2 minutes; `llmgw ctl replicas` and the log say why');
      return;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}
