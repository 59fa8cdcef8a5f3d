// The router's end-to-end harness, shared by src/gateway/router-*.test.ts,
// key-rules, passthrough, contract and core/ledger tests: a Fastify app from createJsonApp with the router registered as the control
// plane registers it, in-memory catalog and replica directory stubs, a key
// store with one key, the official `openai` client, and real sim engines as
// replicas. Apart from the tests so that each file of them reads as one
// behaviour; here, not beside them in src/gateway, because it builds the
// control plane's key store and catalog entries, which the gateway itself
// must never import (ESLint and src/architecture.test.ts fence it).
import type { FastifyInstance } from 'fastify';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import pino from 'pino';
import { Registry } from 'prom-client';
import { compileModel, ModelSchema, type Model } from '../../src/control/catalog/index.js';
import type { ModelDefinition } from '../../src/control/catalog/model.js';
import { createJsonApp } from '../../src/http/index.js';
import { startSimEngine, type SimEngine } from '../../src/engine/sim/index.js';
import { issueKey, MemoryKeyStore, MemoryUsageSink } from '../../src/control/keys/index.js';
import {
  openAiErrorShape,
  registerRouter,
  type ReplicaDirectory,
  type Router,
  type RouterDeps,
  type RouterReplica,
} from '../../src/gateway/index.js';
import { waitFor } from './wait.js';

/** What each test started, closed in reverse after it: every helper here pushes its own. */
export const cleanups: (() => Promise<unknown> | unknown)[] = [];

/** Closes what the test started; each test file runs it in afterEach. */
export async function closeAll(): Promise<void> {
  while (cleanups.length) await cleanups.pop()!();
}

export function model(def: Partial<ModelDefinition> & { name: string }): Model {
  return compileModel(
    ModelSchema.parse({ source: `file:///models/${def.name}`, profiles: [{ engine: 'sim' }], ...def }),
    'file',
  );
}

export class StubDirectory implements ReplicaDirectory {
  readonly replicas = new Map<string, RouterReplica[]>();
  /** Models for which demand() answers "one is starting". */
  readonly starting = new Set<string>();
  readonly demands: string[] = [];
  private readonly listeners = new Set<() => void>();

  ready(name: string): readonly RouterReplica[] {
    return this.replicas.get(name) ?? [];
  }
  describe(name: string): string {
    return this.starting.has(name) ? '1 fetching weights, 43%' : 'none is wanted (scaling min 0)';
  }
  demand(name: string): boolean {
    this.demands.push(name);
    return this.starting.has(name);
  }
  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
  set(name: string, replicas: RouterReplica[]): void {
    this.replicas.set(name, replicas);
    for (const l of this.listeners) l();
  }
}

/**
 * The router on a loopback listener, as the control plane builds its client
 * listener, with no key issued: for tests that issue keys of their own
 * limits. `ready` seeds the directory's ready replicas by model name (absent:
 * none). `usage` is the sink the router records into unless `overrides`
 * names another.
 */
export interface Listener {
  url: string;
  router: Router;
  directory: StubDirectory;
  keys: MemoryKeyStore;
  usage: MemoryUsageSink;
  registry: Registry;
  /** The listener's Fastify app. */
  app: FastifyInstance;
}

export interface Harness extends Listener {
  secret: string;
  client: OpenAI;
  clientWith(secret: string): OpenAI;
}

export async function listen(
  models: Model[],
  overrides: Partial<RouterDeps> = {},
  ready: Readonly<Record<string, RouterReplica[]>> = {},
): Promise<Listener> {
  const logger = pino({ level: 'silent' });
  // As the control plane builds its client listener.
  const app = createJsonApp({
    logger,
    bodyLimitBytes: 8 << 20,
    shapeError: openAiErrorShape,
    requestLoggers: false,
    requestIds: true,
  });
  const byName = new Map<string, Model>();
  for (const m of models) for (const n of [m.name, ...m.aliases]) byName.set(n, m);
  const directory = new StubDirectory();
  for (const [name, replicas] of Object.entries(ready)) directory.replicas.set(name, replicas);
  const keys = new MemoryKeyStore();
  const usage = new MemoryUsageSink();
  const registry = new Registry();
  const router = registerRouter(app, {
    catalog: { resolve: (n) => byName.get(n), models: () => models },
    replicas: directory,
    keys,
    authRequired: true,
    usage,
    registry,
    logger,
    random: () => 0,
    retryBackoffMs: 1,
    sweepIntervalMs: 0,
    ...overrides,
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  cleanups.push(() => app.close());
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  return { url, router, directory, keys, usage, registry, app };
}

/** listen(), with one key of no limits issued and the official client holding it. */
export async function harness(
  models: Model[],
  overrides: Partial<RouterDeps> = {},
  ready: Readonly<Record<string, RouterReplica[]>> = {},
): Promise<Harness> {
  const l = await listen(models, overrides, ready);
  const { secret } = await issueKey(l.keys, { name: 'test' }, Date.now(), 'test');
  const clientWith = (s: string) => new OpenAI({ apiKey: s, baseURL: `${l.url}/v1`, maxRetries: 0, timeout: 20_000 });
  return { ...l, secret, client: clientWith(secret), clientWith };
}

export async function sim(m: Model, options: Parameters<typeof startSimEngine>[0] = {}): Promise<SimEngine> {
  const engine = await startSimEngine({ models: [m.name, ...m.aliases], shutdownGraceMs: 0, ...options });
  cleanups.push(() => engine.close({ graceMs: 0 }));
  return engine;
}

export function replica(id: string, endpoint: string): RouterReplica {
  return { id, endpoint, draining: false };
}

/** A sim engine serving `m`, as a replica named after its port. */
export async function simReplica(m: Model): Promise<RouterReplica> {
  const engine = await sim(m);
  return replica(`sim-${engine.port}`, engine.url);
}

/** An endpoint nothing listens on: a port that was just bound and released. */
export async function closedEndpoint(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

/** The shared wait, in the order these tests read their checks (condition first). */
export function eventually(check: () => boolean, what: string, timeoutMs = 5_000): Promise<true> {
  return waitFor(what, check, { timeoutMs, intervalMs: 10 });
}

export async function caught(p: Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> {
  try {
    await p;
  } catch (err) {
    if (err instanceof OpenAI.APIError) return err;
    throw err;
  }
  throw new Error('expected the request to fail');
}
