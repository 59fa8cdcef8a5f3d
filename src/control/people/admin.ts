// The admin listener's routes over people: list, create with a role,
// rotate or expire a person's tokens, delete, and "who am I". Each route
// declares its permission (only an admin manages people; anyone signed in
// may ask who they are). Apart from people.ts, which the guard and the
// dashboard's sign-in use without any route.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { LoginInfoView, PersonTokenView, PersonView, WhoAmIView } from '../../api/people-types.js';
import { LlmgwError } from '../../errors/index.js';
import {
  actorOf,
  needs,
  principalOf,
  ROLE_PERMISSIONS,
  ROLES,
  type RouteJsonWording,
  type ZodTypeProvider,
} from '../../http/index.js';
import { parseDurationMs } from '../../units/index.js';
import type { PersonRow, PersonTokenRow } from '../store/people.js';
import { DEFAULT_TOKEN_TTL_MS, type IssuedToken, type People } from './people.js';
import { registerDeviceLogin } from './device-routes.js';
import type { DeviceSignIns } from './device.js';

const ExpiresIn = z.string().min(1).max(20).optional();

const NewPersonSchema = z.strictObject({
  name: z.string().min(1).max(200),
  role: z.enum(ROLES, { error: () => `role: want one of ${ROLES.join(', ')}` }),
  /** The teams a team-admin acts for; absent = none (every other role). */
  teams: z.array(z.string().min(1).max(200)).max(100).optional(),
  /** How long the first token lives, like 30d; absent = 90d. */
  expires_in: ExpiresIn,
});

const RotateSchema = z.strictObject({ expires_in: ExpiresIn });

export interface PeopleAdminDeps {
  /** Null: no store, so people cannot be kept; every route but whoami says so. */
  people: People | null;
  now: () => number;
  /** Single sign-on is configured (and there is a store): ctl login has a page to send a person to. */
  sso: boolean;
  /** ctl login's device flow; absent = none (no SSO). */
  device?: DeviceSignIns;
}

export function registerPeopleAdmin(fastify: FastifyInstance, deps: PeopleAdminDeps): void {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const people = (): People => {
    if (!deps.people)
      throw new LlmgwError('LLMGW_NO_STORE', 'people need a store (--store), where they and their tokens are kept');
    return deps.people;
  };
  const wording: RouteJsonWording = { invalidBody: 'the person is not valid' };

  // Public: ctl login asks before it has any token. Only with single sign-on: otherwise there is nothing to say.
  if (deps.sso)
    app.get('/api/v1/login', { config: { access: 'public' } }, async (): Promise<LoginInfoView> => ({
      sso: true,
      token_page: '/login/token',
      device_authorization: deps.device ? await deps.device.supported() : false,
    }));
  if (deps.device) registerDeviceLogin(app, deps.device);

  app.get('/api/v1/whoami', needs('self'), async (request): Promise<WhoAmIView> => {
    const p = principalOf(request);
    if (!p) throw new LlmgwError('LLMGW_UNAUTHORIZED', 'this request proved no identity');
    return {
      identity: p.identity,
      person: p.person,
      role: p.role,
      teams: [...p.teams],
      permissions: [...ROLE_PERMISSIONS[p.role]],
    };
  });

  app.get('/api/v1/people', needs('people.read'), async (): Promise<{ people: PersonView[] }> => {
    const [rows, tokens] = await Promise.all([people().list(), people().tokens()]);
    const now = deps.now();
    return {
      people: rows.map((r) =>
        personView(
          r,
          tokens.filter((t) => t.person === r.name),
          now,
        ),
      ),
    };
  });

  app.post(
    '/api/v1/people',
    {
      ...needs('people.write', wording),
      schema: { body: NewPersonSchema.prefault({} as z.input<typeof NewPersonSchema>) },
    },
    async (request, reply) => {
      const body = request.body;
      const { person, token } = await people().create(
        { name: body.name, role: body.role, teams: body.teams ?? [] },
        ttlOf(body.expires_in),
        actorOf(request),
      );
      return reply.code(201).send({ ...personView(person, [token.row], deps.now()), ...secretOf(token) });
    },
  );

  app.post(
    '/api/v1/people/:name/rotate',
    { ...needs('people.write', wording), schema: { body: RotateSchema.prefault({}) } },
    async (request) => {
      const name = (request.params as { name: string }).name;
      const token = await people().issue(name, 'rotated', ttlOf(request.body.expires_in), actorOf(request), true);
      return { name, ...tokenView(token.row, deps.now()), ...secretOf(token) };
    },
  );

  app.post('/api/v1/people/:name/expire', needs('people.write'), async (request) => {
    const name = (request.params as { name: string }).name;
    const ended = await people().expire(name, actorOf(request));
    return { name, tokens_expired: ended };
  });

  app.delete('/api/v1/people/:name', needs('people.write'), async (request) => {
    const name = (request.params as { name: string }).name;
    await people().delete(name, actorOf(request));
    return { name, deleted: true };
  });
}

/** `expires_in` as ms; absent = the default. A bad duration is a 400 naming the field. */
export function ttlOf(text: string | undefined): number {
  if (text === undefined) return DEFAULT_TOKEN_TTL_MS;
  const ms = parseDurationMs(text);
  if (typeof ms === 'string') throw new LlmgwError('LLMGW_BAD_REQUEST', `expires_in: ${ms}`);
  return ms;
}

function secretOf(token: IssuedToken): { token: string; note: string } {
  return { token: token.secret, note: 'the token is shown this once; store it now (LLMGW_ADMIN_TOKEN for ctl)' };
}

export function personView(p: PersonRow, tokens: readonly PersonTokenRow[], nowMs: number): PersonView {
  return {
    name: p.name,
    role: p.role,
    teams: p.teams,
    source: p.source,
    created_at: new Date(p.createdMs).toISOString(),
    created_by: p.createdBy,
    tokens: tokens.map((t) => tokenView(t, nowMs)),
  };
}

function tokenView(t: PersonTokenRow, nowMs: number): PersonTokenView {
  return {
    prefix: t.prefix,
    label: t.label,
    created_at: new Date(t.createdMs).toISOString(),
    expires_at: new Date(t.expiresMs).toISOString(),
    state: t.expiresMs <= nowMs ? 'expired' : 'active',
  };
}
