// Remote endpoints and spill-over as the operator writes them. A profile
// `engine: remote` with a `remote` block points a model at an API elsewhere
// (a hosted API, a colleague's vLLM, another llmgw: `api: llmgw`), and needs
// no `source`: nothing is fetched or placed for it. A model's `spill` block
// names where its requests go when its own replicas cannot take them in
// time. The API key is the one field no view may show: the compiled model
// carries it as a SecretText, which every serialisation (the store's row,
// the audit log, the API, a log line) writes as `set`. Apart from model.ts
// because none of it is about replicas llmgw runs.
import { inspect } from 'node:util';
import { durationSchema } from '../../validation/durations.js';
import { z } from 'zod';
import type { RemoteReplicaTraits, SpillPolicy, SpillWhen } from '../../gateway/ports/index.js';
import type { ServedEndpoint } from '../../gateway/ports/endpoints.js';
import { parseDurationMs } from '../../units/index.js';

/** The engine name of a remote profile. */
export const REMOTE_ENGINE = 'remote';

/** What a kept definition says in place of an API key; what views show. */
export const SECRET_SET = 'set';

/**
 * The APIs a remote may speak: `chat` (OpenAI's Chat Completions, and its
 * completions and embeddings, which every client dialect is translated to),
 * `llmgw` (another llmgw: chat as well, with its fleet's load read from
 * /v1/llmgw/capacity), `responses` (OpenAI's Responses API at /v1/responses)
 * and `anthropic` (Anthropic's Messages API at /v1/messages, its key in
 * x-api-key): for those two the gateway translates each chat request and
 * its answer (src/gateway/remote/foreign.ts), and they serve chat only.
 */
export const REMOTE_APIS = ['chat', 'llmgw', 'responses', 'anthropic'] as const;
export type RemoteApi = (typeof REMOTE_APIS)[number];

/** What absent means for a remote's optional keys: the one table of its defaults. */
export const REMOTE_DEFAULTS = Object.freeze({
  /** How long the remote may take to send its answer's headers (a prompt's prefill included). */
  timeoutMs: 60_000,
  /** spill.max_queue: the wait a local queue may add before a request spills. */
  maxQueueMs: 1_000,
});

const duration = durationSchema({ like: '30s or 500ms' });

export const RemoteSchema = z.strictObject({
  /** The base URL its API's paths go under (llmgw appends /v1/chat/completions): `https://api.example.com`. */
  url: z.url({ protocol: /^https?$/, error: 'want an http:// or https:// URL, like https://api.example.com' }),
  /** The model name the remote serves; absent = this model's own name. */
  model: z.string().min(1).max(256).optional(),
  api: z.enum(REMOTE_APIS, { error: `want one of ${REMOTE_APIS.join(', ')}` }).default('chat'),
  /** The remote's API key; kept encrypted in the store and shown as `set`. Absent (and no file) = none sent. */
  api_key: z.string().min(1).max(4096).optional(),
  /** A file holding the API key, read by the control plane; never stored. */
  api_key_file: z.string().min(1).optional(),
  /** How long the remote may take to send its answer's headers; absent = 60s. */
  timeout: duration.optional(),
});

export const SpillSchema = z.strictObject({
  /** The model requests spill to: usually an `engine: remote` model or a peer llmgw. */
  to: z.string().min(1, 'want the name of a model'),
  when: z.enum(['saturated', 'cold', 'never'], { error: 'want saturated, cold or never' }).default('saturated'),
  /** The predicted wait in a local engine's queue above which a request spills; absent = 1s. */
  max_queue: duration.optional(),
});

/** A secret in memory: every way of printing it (JSON, util.inspect, template strings) says `set`. */
export class SecretText {
  readonly #value: string;
  constructor(value: string) {
    this.#value = value;
  }
  /** The secret itself, for the one place that sends it upstream. */
  reveal(): string {
    return this.#value;
  }
  toJSON(): string {
    return SECRET_SET;
  }
  toString(): string {
    return SECRET_SET;
  }
  [inspect.custom](): string {
    return SECRET_SET;
  }
}

/** Where a remote's API key comes from. */
export type RemoteKey =
  | { readonly kind: 'none' }
  /** Written in the definition: the catalog file's (kept in memory only), or one just added through the API (to be sealed). */
  | { readonly kind: 'inline'; readonly secret: SecretText }
  /** Sealed in the store (a kept definition says `set`). */
  | { readonly kind: 'stored' }
  | { readonly kind: 'file'; readonly path: string };

/** A model's remote endpoint, compiled. */
export interface RemoteEndpoint {
  readonly url: string;
  /** The name the remote serves the model under. */
  readonly servedModel: string;
  readonly api: RemoteApi;
  readonly key: RemoteKey;
  readonly traits: RemoteReplicaTraits;
}

type RemoteDef = z.output<typeof RemoteSchema>;
interface ProfileLike {
  readonly engine: string;
  readonly remote?: RemoteDef | undefined;
  readonly gpus?: number | undefined;
  readonly args: readonly string[];
}
interface DefLike {
  readonly name: string;
  readonly source?: string | undefined;
  readonly profiles: readonly ProfileLike[];
  readonly spill?: z.output<typeof SpillSchema> | undefined;
}

/** Whether a profile is one llmgw runs (not a remote). */
export function isLocalProfile<P extends ProfileLike>(p: P): boolean {
  return p.engine !== REMOTE_ENGINE;
}

/** Problems of a definition's remote profile and spill block on their own, as sentences. */
export function remoteProblems(def: DefLike): string[] {
  const problems: string[] = [];
  const remotes = def.profiles.filter((p) => p.engine === REMOTE_ENGINE);
  def.profiles.forEach((p, i) => {
    if (p.engine === REMOTE_ENGINE && !p.remote)
      problems.push(`profiles[${i}]: engine remote needs a remote block (url, model, api, api_key or api_key_file)`);
    if (p.engine !== REMOTE_ENGINE && p.remote)
      problems.push(`profiles[${i}].remote: only an engine: remote profile takes a remote block`);
    if (p.engine === REMOTE_ENGINE && ((p.gpus ?? 0) > 0 || p.args.length > 0))
      problems.push(`profiles[${i}]: a remote profile runs nothing here; leave out gpus and args`);
    if (p.remote?.api_key !== undefined && p.remote.api_key_file !== undefined)
      problems.push(`profiles[${i}].remote: give api_key or api_key_file, not both`);
  });
  if (remotes.length > 0 && def.profiles.length > 1)
    problems.push(
      'profiles: a remote profile is a model of its own; to send a local model to a remote when its replicas are full, declare the remote as its own model and name it in spill.to',
    );
  if (remotes.length === 0 && def.source === undefined)
    problems.push('source: is required (only an engine: remote model has none)');
  if (def.spill && def.spill.to === def.name) problems.push('spill.to: a model cannot spill to itself');
  if (def.spill && remotes.length > 0) problems.push('spill: a remote model has no local replicas to spill from');
  return problems;
}

/** Problems against the catalog: spill.to must name a model. */
export function remoteCatalogProblems(def: DefLike, known: ReadonlyMap<string, unknown>): string[] {
  if (def.spill && def.spill.to !== def.name && !known.has(def.spill.to))
    return [`spill.to: "${def.spill.to}" names no model in the catalog`];
  return [];
}

/** The compiled remote and spill parts of a model; absent fields = none. */
export interface CompiledRemote {
  /** Set for an `engine: remote` model: it has no local profiles, and llmgw starts no replica of it. */
  readonly remote?: RemoteEndpoint;
  readonly spill?: SpillPolicy;
}

export function compileRemote(def: DefLike): CompiledRemote {
  const out: { remote?: RemoteEndpoint; spill?: SpillPolicy } = {};
  const r = def.profiles.find((p) => p.engine === REMOTE_ENGINE)?.remote;
  if (r) {
    const key: RemoteKey =
      r.api_key_file !== undefined
        ? { kind: 'file', path: r.api_key_file }
        : r.api_key === undefined
          ? { kind: 'none' }
          : r.api_key === SECRET_SET
            ? { kind: 'stored' }
            : { kind: 'inline', secret: new SecretText(r.api_key) };
    out.remote = {
      url: r.url.replace(/\/+$/, ''),
      servedModel: r.model ?? def.name,
      api: r.api,
      key,
      traits: {
        kind: r.api === 'llmgw' ? 'peer' : 'endpoint',
        timeoutMs: r.timeout === undefined ? REMOTE_DEFAULTS.timeoutMs : (parseDurationMs(r.timeout) as number),
        ...(r.api === 'responses' || r.api === 'anthropic' ? { api: r.api } : {}),
      },
    };
  }
  if (def.spill) {
    out.spill = {
      to: def.spill.to,
      when: def.spill.when as SpillWhen,
      maxQueueMs:
        def.spill.max_queue === undefined
          ? REMOTE_DEFAULTS.maxQueueMs
          : (parseDurationMs(def.spill.max_queue) as number),
    };
  }
  return out;
}

/** The definition as kept and shown: a remote's api_key replaced by `set`, nothing else changed. */
export function withoutSecret<D extends DefLike>(def: D): D {
  if (!def.profiles.some((p) => p.remote?.api_key !== undefined)) return def;
  return {
    ...def,
    profiles: def.profiles.map((p) =>
      p.remote?.api_key === undefined ? p : { ...p, remote: { ...p.remote, api_key: SECRET_SET } },
    ),
  };
}

/** What a remote model serves when it does not say: what every OpenAI-compatible API has. */
export const REMOTE_ENDPOINTS: readonly ServedEndpoint[] = ['chat', 'completions', 'embeddings'];

/** The same for a remote of `api`: a Responses or Messages API is reached through chat alone (no completions, no embeddings). */
export function remoteEndpoints(api: RemoteApi): readonly ServedEndpoint[] {
  return api === 'responses' || api === 'anthropic' ? ['chat'] : REMOTE_ENDPOINTS;
}
