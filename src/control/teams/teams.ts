// Teams and how a key's limits follow from its team's: pure functions over
// records, no I/O. A key inherits its team's allowed models and per-minute
// limits and may only narrow them; the key the gateway sees is the
// narrowing of both (`narrowKey`), and a key that asks for more than its
// team is refused when it is made (`excessOver`).
import type { ApiKeyRecord } from '../../gateway/ports/index.js';
import { DEFAULT_TEAM } from '../store/migrations-teams.js';
export { DEFAULT_TEAM };

export interface TeamRecord {
  readonly name: string;
  /** Model names (canonical) its keys may use; null = every model. */
  readonly allowedModels: readonly string[] | null;
  /** Each of its keys' ceiling in requests per minute; null = none (the key's own, if any). */
  readonly requestsPerMinute: number | null;
  /** Each of its keys' ceiling in tokens per minute; null = none. */
  readonly tokensPerMinute: number | null;
  /** Its share of a saturated model's queue against other teams' (src/gateway/fair-share): 2 = twice the turns of 1. Absent = 1. */
  readonly weight?: number;
  readonly createdAtMs: number;
  readonly createdBy: string;
  readonly updatedAtMs: number;
}

/** A team's name: lower-case letters, digits, '.', '_' and '-', starting with a letter or digit, at most 63. */
export const TEAM_NAME = /^[a-z0-9][a-z0-9._-]{0,62}$/;

/** What a key asks for, as the key admin route reads it. */
export interface KeyAsk {
  readonly allowedModels: readonly string[] | null;
  readonly requestsPerMinute: number | null;
  readonly tokensPerMinute: number | null;
}

/** The smaller of two limits where null means none. */
function narrower(a: number | null, b: number | null): number | null {
  if (a === null) return b;
  if (b === null) return a;
  return Math.min(a, b);
}

/**
 * The key as the gateway enforces it: the team's allowed models and
 * per-minute limits, narrowed by the key's own. `canonical` maps a name or
 * alias to the model's name (undefined = no such model), so a key that
 * lists an alias of a model its team allows keeps it.
 */
export function narrowKey(
  key: ApiKeyRecord,
  team: TeamRecord | undefined,
  canonical: (name: string) => string | undefined,
): ApiKeyRecord {
  if (!team) return key;
  let allowedModels = key.allowedModels;
  if (team.allowedModels !== null) {
    const teamAllows = new Set(team.allowedModels);
    allowedModels =
      key.allowedModels === null
        ? team.allowedModels
        : key.allowedModels.filter((m) => teamAllows.has(m) || teamAllows.has(canonical(m) ?? m));
  }
  return {
    ...key,
    allowedModels,
    requestsPerMinute: narrower(key.requestsPerMinute, team.requestsPerMinute),
    tokensPerMinute: narrower(key.tokensPerMinute, team.tokensPerMinute),
    team: team.name,
    ...(team.weight !== undefined && team.weight !== 1 ? { teamWeight: team.weight } : {}),
  };
}

/**
 * What a new key asks for beyond its team, one phrase per field; empty =
 * it narrows or inherits everything. A key asking for every model (null)
 * in a team limited to some only inherits the team's list: that is no excess.
 */
export function excessOver(ask: KeyAsk, team: TeamRecord, canonical: (name: string) => string | undefined): string[] {
  const out: string[] = [];
  if (team.allowedModels !== null && ask.allowedModels !== null) {
    const teamAllows = new Set(team.allowedModels);
    const beyond = ask.allowedModels.filter((m) => !teamAllows.has(canonical(m) ?? m) && !teamAllows.has(m));
    if (beyond.length)
      out.push(
        `allowed_models: team "${team.name}" allows ${team.allowedModels.map((m) => `"${m}"`).join(', ') || 'no model'}, not ${beyond.map((m) => `"${m}"`).join(', ')}`,
      );
  }
  const over = (field: string, asked: number | null, ceiling: number | null) => {
    if (asked !== null && ceiling !== null && asked > ceiling)
      out.push(`${field}: ${asked} is more than team "${team.name}" allows each key (${ceiling})`);
  };
  over('requests_per_minute', ask.requestsPerMinute, team.requestsPerMinute);
  over('tokens_per_minute', ask.tokensPerMinute, team.tokensPerMinute);
  return out;
}

/** A team as the admin API shows it; `keys`: how many live keys it holds. */
/** Whether a key still works: not revoked, not expired at `nowMs`. */
export function liveKey(k: ApiKeyRecord, nowMs: number): boolean {
  return k.revokedAtMs === null && (k.expiresAtMs === null || k.expiresAtMs > nowMs);
}

/**
 * The teams in `scope` (null = every team) with their live keys counted, as
 * GET /api/v1/teams lists them and the dashboard's teams page shows them.
 */
export function teamViews(
  teams: readonly TeamRecord[],
  keys: readonly ApiKeyRecord[],
  nowMs: number,
  scope: readonly string[] | null,
): Record<string, unknown>[] {
  const count = new Map<string, number>();
  for (const k of keys) {
    const team = k.team ?? DEFAULT_TEAM;
    if (liveKey(k, nowMs)) count.set(team, (count.get(team) ?? 0) + 1);
  }
  return teams.filter((t) => scope === null || scope.includes(t.name)).map((t) => teamView(t, count.get(t.name) ?? 0));
}

export function teamView(t: TeamRecord, keys: number): Record<string, unknown> {
  return {
    name: t.name,
    allowed_models: t.allowedModels,
    requests_per_minute: t.requestsPerMinute,
    tokens_per_minute: t.tokensPerMinute,
    weight: t.weight ?? 1,
    keys,
    created_at: new Date(t.createdAtMs).toISOString(),
    created_by: t.createdBy,
    updated_at: new Date(t.updatedAtMs).toISOString(),
  };
}
