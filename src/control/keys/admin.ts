// The admin listener's routes over keys and usage: issuing, listing and
// revoking keys, and reading what each key spent. Apart from keys.ts
// because the router, which reads keys on every request, needs none of it.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { LlmgwError } from '../../errors/index.js';
import {
  actorOf,
  type AuditActor,
  mayActOnTeam,
  needs,
  type RouteJsonWording,
  teamsInScope,
  type ZodTypeProvider,
} from '../../http/index.js';
import { type ApiKeyRecord, issueKey, keyView, type KeyStore } from './keys.js';
import type { UsageRow } from './stored.js';
import { API_ENDPOINTS } from '../catalog/index.js';
import { PRIORITY_CLASSES } from '../../gateway/ports/index.js';

const NewKeySchema = z.strictObject({
  name: z.string().min(1).max(200),
  /** Absent or null = every model. */
  allowed_models: z.array(z.string().min(1)).nullable().optional(),
  requests_per_minute: z.number().int().min(1).nullable().optional(),
  tokens_per_minute: z.number().int().min(1).nullable().optional(),
  /** An ISO 8601 instant; absent or null = never. */
  expires_at: z
    .string()
    .refine((v) => !Number.isNaN(Date.parse(v)), { message: 'want an ISO 8601 time such as 2027-01-31T00:00:00Z' })
    .nullable()
    .optional(),
  /** The team the key belongs to; absent = `default`. Its limits cap the key's. */
  team: z.string().min(1).max(63).optional(),
  /** Its requests' class when a model queues them (docs/fair-share.md); absent = interactive. */
  priority: z.enum(PRIORITY_CLASSES, { error: `want one of ${PRIORITY_CLASSES.join(', ')}` }).optional(),
});

export interface KeyAdminDeps {
  keys: KeyStore;
  now: () => number;
  /** Records a write for the audit log; called after the write succeeded. */
  audit: (actor: AuditActor, action: string, target: string, detail: Record<string, unknown>) => void | Promise<void>;
  /** Checks a model name exists, so a key is not limited to a typo; absent = not checked. */
  modelExists?: (name: string) => boolean;
  /**
   * Checks the team exists and the key asks no more than it allows, throwing
   * an LlmgwError that says what to fix; absent = keys have no teams.
   */
  checkTeam?: (
    team: string,
    ask: { allowedModels: string[] | null; requestsPerMinute: number | null; tokensPerMinute: number | null },
  ) => void;
}

/**
 * POST/GET/DELETE /api/v1/keys on the admin listener (which has already
 * checked the admin token). Revoking is by exact id, never by name or prefix.
 */
export function registerKeyAdmin(fastify: FastifyInstance, deps: KeyAdminDeps): void {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  // No body reads as {}, which is checked like any other (its type is wrong only until zod says what is missing).
  const newKey = { body: NewKeySchema.prefault({} as z.input<typeof NewKeySchema>) };
  const wording: RouteJsonWording = { invalidBody: 'the key is not valid' };
  app.post('/api/v1/keys', { schema: newKey, ...needs('keys.write', wording) }, async (request, reply) => {
    const body = request.body;
    const unknown = (body.allowed_models ?? []).filter((m) => deps.modelExists && !deps.modelExists(m));
    if (unknown.length)
      throw new LlmgwError(
        'LLMGW_BAD_REQUEST',
        `allowed_models: no model is named ${unknown.map((m) => `"${m}"`).join(', ')}`,
      );
    const now = deps.now();
    const expiresAtMs = body.expires_at ? Date.parse(body.expires_at) : null;
    if (expiresAtMs !== null && expiresAtMs <= now)
      throw new LlmgwError('LLMGW_BAD_REQUEST', 'expires_at: the time is in the past; a key must be usable when made');
    const team = deps.checkTeam ? (body.team ?? 'default') : undefined;
    if (team !== undefined)
      deps.checkTeam!(team, {
        allowedModels: body.allowed_models ?? null,
        requestsPerMinute: body.requests_per_minute ?? null,
        tokensPerMinute: body.tokens_per_minute ?? null,
      });
    else if (body.team !== undefined)
      throw new LlmgwError('LLMGW_BAD_REQUEST', 'team: this control plane keeps no teams; leave it out');
    // A team-admin makes keys in its own teams only.
    if (!mayActOnTeam(request, team ?? DEFAULT_KEY_TEAM))
      throw new LlmgwError('LLMGW_FORBIDDEN', notYourTeam(request, team ?? DEFAULT_KEY_TEAM));
    const actor = actorOf(request);
    const { record, secret } = await issueKey(
      deps.keys,
      {
        name: body.name,
        allowedModels: body.allowed_models ?? null,
        requestsPerMinute: body.requests_per_minute ?? null,
        tokensPerMinute: body.tokens_per_minute ?? null,
        expiresAtMs,
        ...(team === undefined ? {} : { team }),
        ...(body.priority === undefined ? {} : { priority: body.priority }),
      },
      now,
      actor,
    );
    await deps.audit(actor, 'key.create', record.id, {
      name: record.name,
      prefix: record.prefix,
      ...(team === undefined ? {} : { team }),
    });
    return reply
      .code(201)
      .send({ ...keyView(record, now), secret, note: 'the secret is shown this once; store it now' });
  });

  app.get('/api/v1/keys', needs('keys.read'), async (request) => {
    const now = deps.now();
    const keys = (await deps.keys.list()).filter((k) => mayActOnTeam(request, keyTeam(k)));
    return { keys: keys.map((k) => keyView(k, now)) };
  });

  app.delete(
    '/api/v1/keys/:id',
    { ...needs('keys.write'), schema: { params: z.object({ id: z.string() }) } },
    async (request) => {
      const id = request.params.id;
      const key = (await deps.keys.list()).find((k) => k.id === id);
      // Another team's key reads as no key at all to a team-admin: its id says nothing about the other team.
      if (key && !mayActOnTeam(request, keyTeam(key)))
        throw new LlmgwError(
          'LLMGW_NOT_FOUND',
          `no key of your teams has the id "${id}"; \`GET /api/v1/keys\` lists them`,
        );
      const ok = await deps.keys.revoke(id, deps.now());
      if (!ok) throw new LlmgwError('LLMGW_NOT_FOUND', `no key has the id "${id}"; \`GET /api/v1/keys\` lists them`);
      await deps.audit(actorOf(request), 'key.revoke', id, {});
      return { id, state: 'revoked' };
    },
  );
}

export interface UsageAdminDeps {
  /** The usage rows the store holds; absent = this control plane has no store, and the answer is an empty list. */
  usage?: { list(filter?: { endpoint?: string }): Promise<UsageRow[]> };
  /** The keys, to keep a team-admin to its own teams' rows; absent = no rows for a team-admin. */
  keys?: Pick<KeyStore, 'list'>;
}

/** What `?endpoint=` may name: every API of the client listener, and 'unknown' for what was counted before endpoints were. */
const USAGE_ENDPOINTS = [...API_ENDPOINTS, 'unknown'] as const;

const UsageQuerySchema = z.object({
  endpoint: z
    .enum(USAGE_ENDPOINTS, {
      error: (issue) =>
        `"${String(issue.input).slice(0, 40)}" is no endpoint; want one of ${USAGE_ENDPOINTS.join(', ')}`,
    })
    .optional(),
});

/** GET /api/v1/usage on the admin listener: the totals per key, model and endpoint; `?endpoint=rerank` keeps one endpoint's rows. */
export function registerUsageAdmin(fastify: FastifyInstance, deps: UsageAdminDeps): void {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  app.get('/api/v1/usage', { ...needs('usage.read'), schema: { querystring: UsageQuerySchema } }, async (request) => {
    const endpoint = request.query.endpoint;
    if (!deps.usage) return [];
    const rows = await deps.usage.list(endpoint === undefined ? {} : { endpoint });
    if (teamsInScope(request) === null) return rows;
    const ours = new Set(
      ((await deps.keys?.list()) ?? []).filter((k) => mayActOnTeam(request, keyTeam(k))).map((k) => k.id),
    );
    return rows.filter((r) => ours.has(r.key_id));
  });
}

/** The team a key is in, as a team-admin's scope reads it: the key's own, `default` for a key from before teams. */
const DEFAULT_KEY_TEAM = 'default';
export function keyTeam(k: Pick<ApiKeyRecord, 'team'>): string {
  return k.team ?? DEFAULT_KEY_TEAM;
}

function notYourTeam(request: Parameters<typeof teamsInScope>[0], team: string): string {
  return `a team-admin of ${(teamsInScope(request) ?? []).join(', ') || 'no team'} may not make keys in team "${team}"`;
}
