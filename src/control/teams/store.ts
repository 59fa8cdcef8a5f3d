// Where teams live: in memory for a control plane without a store (one
// `default` team), in the store otherwise, cached in memory because the
// gateway narrows every request's key by its team. `version` moves on every
// change, so a cache of narrowed keys knows when it is stale.
import type { StoreConnection } from '../store/index.js';
import { DEFAULT_TEAM, type TeamRecord } from './teams.js';

export interface TeamStore {
  get(name: string): TeamRecord | undefined;
  /** Sorted by name. */
  list(): readonly TeamRecord[];
  /** Moves on every change this process makes or reads. */
  readonly version: number;
  create(team: TeamRecord): Promise<void>;
  /** Replaces the team's limits; false when no team has the name. */
  update(team: TeamRecord): Promise<boolean>;
  delete(name: string): Promise<boolean>;
}

export class MemoryTeams implements TeamStore {
  private readonly byName = new Map<string, TeamRecord>();
  version = 0;

  constructor(teams: readonly TeamRecord[] = [defaultTeam(0)]) {
    for (const t of teams) this.byName.set(t.name, t);
  }

  get(name: string): TeamRecord | undefined {
    return this.byName.get(name);
  }

  list(): readonly TeamRecord[] {
    return [...this.byName.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  replaceAll(teams: readonly TeamRecord[]): void {
    this.byName.clear();
    for (const t of teams) this.byName.set(t.name, t);
    this.version++;
  }

  async create(team: TeamRecord): Promise<void> {
    this.byName.set(team.name, team);
    this.version++;
  }

  async update(team: TeamRecord): Promise<boolean> {
    if (!this.byName.has(team.name)) return false;
    this.byName.set(team.name, team);
    this.version++;
    return true;
  }

  async delete(name: string): Promise<boolean> {
    const had = this.byName.delete(name);
    if (had) this.version++;
    return had;
  }
}

/** The team every control plane has, for keys made without naming one. */
export function defaultTeam(atMs: number): TeamRecord {
  return {
    name: DEFAULT_TEAM,
    allowedModels: null,
    requestsPerMinute: null,
    tokensPerMinute: null,
    createdAtMs: atMs,
    createdBy: 'llmgw',
    updatedAtMs: atMs,
  };
}

export class StoredTeams implements TeamStore {
  private readonly cache = new MemoryTeams([]);

  private constructor(private readonly store: StoreConnection) {}

  static async create(store: StoreConnection): Promise<StoredTeams> {
    const teams = new StoredTeams(store);
    await teams.reload();
    return teams;
  }

  get version(): number {
    return this.cache.version;
  }

  /** Reads every team again: another control plane may have changed one (it announces 'keys'). */
  async reload(): Promise<void> {
    const rows = await this.store.db.selectFrom('teams').selectAll().execute();
    this.cache.replaceAll(
      rows.map((r) => ({
        name: r.name,
        allowedModels: r.allowed_models === null ? null : (JSON.parse(r.allowed_models) as string[]),
        requestsPerMinute: r.requests_per_minute,
        tokensPerMinute: r.tokens_per_minute,
        weight: Number(r.weight),
        createdAtMs: Number(r.created_at),
        createdBy: r.created_by,
        updatedAtMs: Number(r.updated_at),
      })),
    );
  }

  get(name: string): TeamRecord | undefined {
    return this.cache.get(name);
  }

  list(): readonly TeamRecord[] {
    return this.cache.list();
  }

  async create(team: TeamRecord): Promise<void> {
    await this.store.db.insertInto('teams').values(row(team)).execute();
    await this.store.announce(this.store.db, 'keys');
    await this.cache.create(team);
  }

  async update(team: TeamRecord): Promise<boolean> {
    const r = row(team);
    const result = await this.store.db
      .updateTable('teams')
      .set({
        allowed_models: r.allowed_models,
        requests_per_minute: r.requests_per_minute,
        tokens_per_minute: r.tokens_per_minute,
        weight: r.weight,
        updated_at: r.updated_at,
      })
      .where('name', '=', team.name)
      .executeTakeFirst();
    if (Number(result.numUpdatedRows) === 0) return false;
    await this.store.announce(this.store.db, 'keys');
    await this.cache.create(team);
    return true;
  }

  async delete(name: string): Promise<boolean> {
    const result = await this.store.db.deleteFrom('teams').where('name', '=', name).executeTakeFirst();
    await this.store.announce(this.store.db, 'keys');
    await this.cache.delete(name);
    return Number(result.numDeletedRows) > 0;
  }
}

function row(t: TeamRecord) {
  return {
    name: t.name,
    allowed_models: t.allowedModels === null ? null : JSON.stringify(t.allowedModels),
    requests_per_minute: t.requestsPerMinute,
    tokens_per_minute: t.tokensPerMinute,
    weight: t.weight ?? 1,
    created_at: t.createdAtMs,
    created_by: t.createdBy,
    updated_at: t.updatedAtMs,
  };
}
