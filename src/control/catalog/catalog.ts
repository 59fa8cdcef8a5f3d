// The catalog: every model the control plane serves, from two origins that
// live side by side. The catalog file is the operator's, loaded at start and
// read-only through the API; models added through the API are kept in the
// store. Validation that needs the whole catalog (names that collide,
// fallbacks that point nowhere or in a circle) happens here, before anything
// is written, so a rejected model leaves no trace.
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { LlmgwError, ValidationError } from '../../errors/index.js';
import type { AuditActor, Store } from '../store/index.js';
import { parseSource } from '../../protocol/index.js';
import { describeIssues } from '../../validation/index.js';
import { compileModel, definitionProblems, type DefinitionChecks, type Model, ModelSchema } from './model.js';
import { remoteCatalogProblems } from './remote.js';
import { trafficCatalogProblems, trafficTargets } from './traffic.js';

export interface CatalogOptions {
  /** Absent: no store (`store: none`); models can come only from the file, and writes answer 501. */
  store?: Store | null;
  /** Path of the YAML catalog file; absent = none. */
  catalogFile?: string | null;
  /** Accept http:// sources (tests on loopback only). */
  allowHttpSources?: boolean;
  /**
   * Accept loader and interpreter hooks (LD_PRELOAD, NODE_OPTIONS, …) in a
   * profile's env, from the file and the API. Absent = refused: with them,
   * whoever may add a model may run code on every node.
   */
  allowUnsafeProfileEnv?: boolean;
  /** Where a remote's api_key given through the API is kept sealed (src/control/secrets); absent = such a model is refused. */
  secrets?: CatalogSecrets;
}

/** What the catalog asks of the secrets store: a remote model's API key is sealed before its definition is kept. */
export interface CatalogSecrets {
  put(model: string, secret: string): Promise<void>;
  delete(model: string): Promise<void>;
}

export class Catalog {
  private byName = new Map<string, Model>();
  /** Name and every alias, lower-cased is NOT applied: names are case-sensitive like the OpenAI API's. */
  private byNameOrAlias = new Map<string, Model>();

  private constructor(
    private readonly store: Store | null,
    private readonly fileModels: readonly Model[],
    private readonly checks: DefinitionChecks,
    private readonly secrets: CatalogSecrets | null = null,
  ) {}

  static async create(options: CatalogOptions): Promise<Catalog> {
    const checks: DefinitionChecks = {
      allowHttp: options.allowHttpSources ?? false,
      allowUnsafeProfileEnv: options.allowUnsafeProfileEnv ?? false,
    };
    const fileModels = options.catalogFile ? loadCatalogFile(options.catalogFile, checks) : [];
    const catalog = new Catalog(options.store ?? null, fileModels, checks, options.secrets ?? null);
    await catalog.reload();
    return catalog;
  }

  /** Whether models can be added and removed (a store is configured). */
  get writable(): boolean {
    return this.store !== null;
  }

  /**
   * Rebuilds the in-memory catalog from the file models and the store. A
   * stored model that collides with a file model stops start-up: silently
   * preferring either would serve something the operator did not choose.
   */
  async reload(): Promise<void> {
    const stored = this.store ? await this.store.models.list() : [];
    const models: Model[] = [...this.fileModels];
    const fileNames = new Set(this.fileModels.flatMap((m) => [m.name, ...m.aliases]));
    for (const row of stored) {
      const parsed = ModelSchema.safeParse(row.definition);
      if (!parsed.success) {
        throw new LlmgwError(
          'LLMGW_CATALOG_INVALID',
          `the stored model "${row.name}" no longer validates: ${describeIssues(ModelSchema, parsed.error).join('; ')}`,
        );
      }
      const model = compileModel(parsed.data, 'store');
      const clash = [model.name, ...model.aliases].find((n) => fileNames.has(n));
      if (clash) {
        throw new LlmgwError(
          'LLMGW_CATALOG_CONFLICT',
          `the catalog file and the store both define "${clash}" (stored model "${model.name}", added by ${row.createdBy}); remove it from one of them: edit the file, or run \`llmgw ctl models rm ${model.name}\` against a control plane started without the file`,
        );
      }
      models.push(model);
    }
    this.index(models);
  }

  private index(models: readonly Model[]): void {
    const byName = new Map<string, Model>();
    const byNameOrAlias = new Map<string, Model>();
    for (const m of models) {
      byName.set(m.name, m);
      byNameOrAlias.set(m.name, m);
    }
    for (const m of models) for (const a of m.aliases) if (!byNameOrAlias.has(a)) byNameOrAlias.set(a, m);
    this.byName = byName;
    this.byNameOrAlias = byNameOrAlias;
  }

  /** Every model, file models first, then stored ones, each group by name. */
  models(): Model[] {
    return [...this.byName.values()].sort((a, b) =>
      a.origin === b.origin ? a.name.localeCompare(b.name) : a.origin === 'file' ? -1 : 1,
    );
  }

  get(name: string): Model | undefined {
    return this.byName.get(name);
  }

  /** Finds a model by its name or one of its aliases. */
  resolve(nameOrAlias: string): Model | undefined {
    return this.byNameOrAlias.get(nameOrAlias);
  }

  /**
   * Validates a definition against itself and the whole catalog; returns the
   * compiled model or throws a ValidationError listing every problem.
   */
  validate(input: unknown): Model {
    return validateAgainst(input, [...this.byName.values()], 'store', this.checks);
  }

  /** Adds a model through the API: validated, stored with its audit row, then visible. */
  async add(input: unknown, actor: string | AuditActor): Promise<Model> {
    if (!this.store) throw noStore('a model added here would not survive a restart');
    const model = this.validate(input);
    // Sealed before the definition (which says `set`) is kept, so a kept remote model always has its key.
    const key = model.remote?.key;
    if (key?.kind === 'inline') {
      if (!this.secrets) throw noStore('the API key of a remote model cannot be kept');
      await this.secrets.put(model.name, key.secret.reveal());
    }
    await this.store.models.insert(model.name, model.definition, {
      actor,
      action: 'model.add',
      target: model.name,
      detail: { definition: model.definition },
    });
    this.index([...this.byName.values(), model]);
    return model;
  }

  /** Removes a stored model. Refused for file models and for models others fall back to. */
  async remove(name: string, actor: string | AuditActor): Promise<void> {
    if (!this.store) throw noStore('nothing can be removed through the API');
    const model = this.byName.get(name);
    if (!model) {
      const viaAlias = this.byNameOrAlias.get(name);
      throw new LlmgwError(
        'LLMGW_MODEL_NOT_FOUND',
        viaAlias
          ? `"${name}" is an alias of "${viaAlias.name}"; remove the model by its name`
          : `no model named "${name}"`,
      );
    }
    if (model.origin === 'file') {
      throw new LlmgwError(
        'LLMGW_MODEL_FROM_FILE',
        `model "${name}" comes from the catalog file; remove it from the file and restart the control plane`,
      );
    }
    const dependents = [...this.byName.values()]
      .filter((m) => m.name !== name && m.fallbacks.some((f) => f === name || model.aliases.includes(f)))
      .map((m) => m.name)
      .sort();
    if (dependents.length) {
      throw new LlmgwError(
        'LLMGW_MODEL_IN_USE',
        `model "${name}" is a fallback of ${dependents.map((d) => `"${d}"`).join(', ')}; remove it from their fallbacks first`,
        { context: { dependents } },
      );
    }
    // A split or shadow naming it would send requests nowhere.
    const senders = [...this.byName.values()]
      .filter((m) => m.name !== name && trafficTargets(m).some((t) => t === name || model.aliases.includes(t)))
      .map((m) => m.name)
      .sort();
    if (senders.length) {
      throw new LlmgwError(
        'LLMGW_MODEL_IN_USE',
        `model "${name}" is a split target or shadow of ${senders.map((d) => `"${d}"`).join(', ')}; remove it from their split and shadow first`,
        { context: { dependents: senders } },
      );
    }
    const removed = await this.store.models.delete(name, {
      actor,
      action: 'model.remove',
      target: name,
      detail: { definition: model.definition },
    });
    if (!removed) throw new LlmgwError('LLMGW_MODEL_NOT_FOUND', `no model named "${name}" (it was removed meanwhile)`);
    if (model.remote) await this.secrets?.delete(name);
    this.index([...this.byName.values()].filter((m) => m.name !== name));
  }
}

function noStore(why: string): LlmgwError {
  return new LlmgwError(
    'LLMGW_NO_STORE',
    `this control plane has no store, so ${why}; set store to sqlite:PATH or a postgres:// URL`,
  );
}

/** Validation of one definition against a set of existing models. */
export function validateAgainst(
  input: unknown,
  existing: readonly Model[],
  origin: Model['origin'],
  checks: DefinitionChecks,
  /** Models that fallbacks may name but names need not avoid: later entries of the same file. */
  peers: readonly Model[] = [],
): Model {
  const parsed = ModelSchema.safeParse(input);
  const label = modelLabel(input);
  if (!parsed.success) {
    // The source is checked even when the shape is wrong, so a definition
    // with several mistakes is fixed in one round.
    const problems = describeIssues(ModelSchema, parsed.error);
    const rawSource = typeof input === 'object' && input !== null ? (input as { source?: unknown }).source : undefined;
    const source =
      typeof rawSource === 'string' && rawSource
        ? parseSource(rawSource, { allowHttp: checks.allowHttp ?? false })
        : null;
    if (typeof source === 'string') problems.push(`source: ${source}`);
    throw new ValidationError('LLMGW_CATALOG_INVALID', problems, label);
  }
  const def = parsed.data;
  const problems = definitionProblems(def, checks);
  const taken = new Map<string, string>();
  for (const m of existing) {
    taken.set(m.name, m.name);
    for (const a of m.aliases) taken.set(a, m.name);
  }
  for (const n of [def.name, ...def.aliases]) {
    const owner = taken.get(n);
    if (owner === undefined) continue;
    const what = n === def.name ? 'name' : 'alias';
    problems.push(
      owner === n
        ? `${what} "${n}" is already the name of a model`
        : `${what} "${n}" is already an alias of model "${owner}"`,
    );
  }
  const known = new Map<string, Model>();
  for (const m of [...existing, ...peers]) {
    known.set(m.name, m);
    for (const a of m.aliases) known.set(a, m);
  }
  for (const f of def.fallbacks) {
    if (f !== def.name && !known.has(f)) problems.push(`fallbacks: "${f}" names no model in the catalog`);
  }
  const cycle = fallbackCycle(def.name, def.fallbacks, known);
  if (cycle) problems.push(`fallbacks: a cycle ${cycle.join(' -> ')}; a fallback chain must end`);
  problems.push(...remoteCatalogProblems(def, known));
  problems.push(...trafficCatalogProblems(def, known));
  if (problems.length) throw new ValidationError('LLMGW_CATALOG_INVALID', problems, label);
  return compileModel(def, origin);
}

function modelName(input: unknown): unknown {
  return typeof input === 'object' && input !== null ? (input as { name?: unknown }).name : undefined;
}

function modelLabel(input: unknown): string {
  const name = modelName(input);
  return typeof name === 'string' && name ? `model "${name}"` : 'the model definition';
}

/** The first cycle reachable from the new model through fallbacks, as names, or null. */
function fallbackCycle(name: string, fallbacks: readonly string[], known: ReadonlyMap<string, Model>): string[] | null {
  const walk = (current: string, path: string[]): string[] | null => {
    const nexts = current === name ? fallbacks : (known.get(current)?.fallbacks ?? []);
    for (const next of nexts) {
      const target = next === name ? name : (known.get(next)?.name ?? next);
      if (target === name) return [...path, next];
      if (path.includes(target)) continue;
      if (known.has(target)) {
        const found = walk(target, [...path, target]);
        if (found) return found;
      }
    }
    return null;
  };
  return walk(name, [name]);
}

/** Reads the catalog file: a list of models, or `{models: [...]}`. Every problem of every model at once. */
export function loadCatalogFile(path: string, checks: DefinitionChecks = {}): Model[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new LlmgwError('LLMGW_CONFIG_INVALID', `cannot read the catalog file ${path}: ${(err as Error).message}`);
  }
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    throw new LlmgwError(
      'LLMGW_CATALOG_INVALID',
      `the catalog file ${path} is not valid YAML: ${(err as Error).message}`,
    );
  }
  const list = doc == null ? [] : Array.isArray(doc) ? doc : (doc as { models?: unknown }).models;
  if (!Array.isArray(list)) {
    throw new LlmgwError(
      'LLMGW_CATALOG_INVALID',
      `the catalog file ${path} must be a list of models, or a mapping with a "models" list`,
    );
  }
  // A fallback may name a model further down the file, so every entry that
  // parses on its own is a possible fallback target for the others.
  const provisional = list.flatMap((entry) => {
    const parsed = ModelSchema.safeParse(entry);
    return parsed.success ? [compileModel(parsed.data, 'file')] : [];
  });
  const models: Model[] = [];
  const problems: string[] = [];
  for (const entry of list) {
    try {
      const taken = new Set(models.map((m) => m.name));
      const peers = provisional.filter((m) => !taken.has(m.name) && m.name !== modelName(entry));
      models.push(validateAgainst(entry, models, 'file', checks, peers));
    } catch (err) {
      if (err instanceof LlmgwError) problems.push(err.message);
      else throw err;
    }
  }
  if (problems.length)
    throw new ValidationError('LLMGW_CATALOG_INVALID', problems, `the catalog file ${path} has problems`);
  return models;
}
