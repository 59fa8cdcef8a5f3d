// The admin listener's routes over teams: list, create, set and delete.
// A team's limits cap its keys' (narrowed on every lookup, so a change
// holds at the next request); deleting a team that still holds live keys
// is refused, as is deleting `default`, where keys made without a team go.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { LlmgwError } from '../../errors/index.js';
import {
  actorOf,
  actorText,
  needs,
  teamsInScope,
  type AuditActor,
  type RouteJsonWording,
  type ZodTypeProvider,
} from '../../http/index.js';
import type { ApiKeyRecord } from '../../gateway/ports/index.js';
import type { TeamStore } from './store.js';
import {
  DEFAULT_TEAM,
  excessOver,
  liveKey,
  TEAM_NAME,
  teamView,
  teamViews,
  type KeyAsk,
  type TeamRecord,
} from './teams.js';

const Limits = {
  /** Absent or null = every model. */
  allowed_models: z.array(z.string().min(1)).nullable().optional(),
  /** Each key's ceiling; absent or null = none. */
  requests_per_minute: z.number().int().min(1).nullable().optional(),
  tokens_per_minute: z.number().int().min(1).nullable().optional(),
  /** Its fair-share weight against other teams when a model queues; absent = 1 (or unchanged). */
  weight: z.number().min(0.01).max(1000).optional(),
};
const NewTeamSchema = z.strictObject({
  name: z.string().regex(TEAM_NAME, {
    message: "want lower-case letters, digits, '.', '_' or '-', starting with a letter or digit, at most 63",
  }),
  ...Limits,
});
/** Only the fields named change; null clears a limit. */
const SetTeamSchema = z.strictObject(Limits);

export interface TeamAdminDeps {
  teams: TeamStore;
  /** Every key, to count a team's live keys and refuse deleting a team that has some. */
  keys: () => Promise<readonly ApiKeyRecord[]> | readonly ApiKeyRecord[];
  now: () => number;
  audit: (actor: AuditActor, action: string, target: string, detail: Record<string, unknown>) => void | Promise<void>;
  /** The canonical name of a model named by its name or an alias; undefined = no such model (a typo is refused). */
  canonical: (name: string) => string | undefined;
}

/** Throws the refusal of a key that asks for more than its team, or names a team that does not exist. */
export function checkKeyTeam(teams: TeamStore, canonical: (name: string) => string | undefined) {
  return (team: string, ask: KeyAsk): void => {
    const found = teams.get(team);
    if (!found)
      throw new LlmgwError(
        'LLMGW_BAD_REQUEST',
        `team: no team is named "${team}"; \`llmgw ctl teams\` lists them, \`llmgw ctl teams create\` makes one`,
      );
    const excess = excessOver(ask, found, canonical);
    if (excess.length)
      throw new LlmgwError(
        'LLMGW_BAD_REQUEST',
        `a key may narrow its team's limits, never widen them: ${excess.join('; ')}`,
      );
  };
}

export function registerTeamAdmin(fastify: FastifyInstance, deps: TeamAdminDeps): void {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const wording: RouteJsonWording = { invalidBody: 'the team is not valid' };
  const checkModels = (models: readonly string[] | null | undefined): string[] | null => {
    if (models === undefined || models === null) return null;
    const unknown = models.filter((m) => deps.canonical(m) === undefined);
    if (unknown.length)
      throw new LlmgwError(
        'LLMGW_BAD_REQUEST',
        `allowed_models: no model is named ${unknown.map((m) => `"${m}"`).join(', ')}`,
      );
    return [...new Set(models.map((m) => deps.canonical(m)!))];
  };
  const keysOf = async (team: string) => {
    const now = deps.now();
    return (await deps.keys()).filter((k) => (k.team ?? DEFAULT_TEAM) === team && liveKey(k, now));
  };

  // A team-admin lists only the teams it administers, as with keys, usage and budgets.
  app.get('/api/v1/teams', needs('teams.read'), async (request) => {
    return { teams: teamViews(deps.teams.list(), await deps.keys(), deps.now(), teamsInScope(request)) };
  });

  app.post(
    '/api/v1/teams',
    { schema: { body: NewTeamSchema.prefault({} as z.input<typeof NewTeamSchema>) }, ...needs('teams.write', wording) },
    async (request, reply) => {
      const body = request.body;
      if (deps.teams.get(body.name))
        throw new LlmgwError(
          'LLMGW_CONFLICT',
          `a team is already named "${body.name}"; \`llmgw ctl teams set ${body.name}\` changes its limits`,
        );
      const actor = actorOf(request);
      const now = deps.now();
      const team: TeamRecord = {
        name: body.name,
        allowedModels: checkModels(body.allowed_models),
        requestsPerMinute: body.requests_per_minute ?? null,
        tokensPerMinute: body.tokens_per_minute ?? null,
        weight: body.weight ?? 1,
        createdAtMs: now,
        createdBy: actorText(actor),
        updatedAtMs: now,
      };
      await deps.teams.create(team);
      await deps.audit(actor, 'team.create', team.name, {});
      return reply.code(201).send(teamView(team, 0));
    },
  );

  app.post(
    '/api/v1/teams/:name',
    {
      schema: { params: z.object({ name: z.string() }), body: SetTeamSchema.prefault({}) },
      ...needs('teams.write', wording),
    },
    async (request) => {
      const name = request.params.name;
      const old = deps.teams.get(name);
      if (!old) throw new LlmgwError('LLMGW_NOT_FOUND', `no team is named "${name}"; \`GET /api/v1/teams\` lists them`);
      const body = request.body;
      const team: TeamRecord = {
        ...old,
        ...(body.allowed_models !== undefined ? { allowedModels: checkModels(body.allowed_models) } : {}),
        ...(body.requests_per_minute !== undefined ? { requestsPerMinute: body.requests_per_minute } : {}),
        ...(body.tokens_per_minute !== undefined ? { tokensPerMinute: body.tokens_per_minute } : {}),
        ...(body.weight !== undefined ? { weight: body.weight } : {}),
        updatedAtMs: deps.now(),
      };
      await deps.teams.update(team);
      await deps.audit(actorOf(request), 'team.set', name, { ...body });
      return teamView(team, (await keysOf(name)).length);
    },
  );

  app.delete(
    '/api/v1/teams/:name',
    { ...needs('teams.write'), schema: { params: z.object({ name: z.string() }) } },
    async (request) => {
      const name = request.params.name;
      if (name === DEFAULT_TEAM)
        throw new LlmgwError(
          'LLMGW_CONFLICT',
          `team "${DEFAULT_TEAM}" cannot be deleted: keys made without a team go there`,
        );
      if (!deps.teams.get(name))
        throw new LlmgwError('LLMGW_NOT_FOUND', `no team is named "${name}"; \`GET /api/v1/teams\` lists them`);
      const held = await keysOf(name);
      if (held.length)
        throw new LlmgwError(
          'LLMGW_CONFLICT',
          `team "${name}" still holds ${held.length} live key(s) (${held
            .slice(0, 5)
            .map((k) => k.id)
            .join(', ')}); revoke them first (\`llmgw ctl keys revoke <id>\`)`,
        );
      await deps.teams.delete(name);
      await deps.audit(actorOf(request), 'team.delete', name, {});
      return { name, state: 'deleted' };
    },
  );
}
