// The dashboard's single sign-on: off to the company's OpenID Connect
// provider and back (people/oidc.ts speaks the protocol), a session for the
// person it names with the role their groups give, and the page where a
// signed-in person gets a token of their own for `llmgw ctl login`. In the
// dashboard's scope, with its sessions and pages, apart from routes.tsx so
// the login's two ways (a token, the provider) each read on their own.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { LlmgwError } from '../../errors/index.js';
import type { AuditActor } from '../../http/index.js';
import type { OidcSignIn, PendingSignIn } from '../people/oidc.js';
import { DEFAULT_TOKEN_TTL_MS, type People } from '../people/people.js';
import { cookieValue, type Session, sessionCookie, type Sessions } from './session.js';
import { CsrfField, type PageContext, Panel } from './components.js';
import { MessagePage } from './pages/login.js';
import type { PageSpec } from './routes.js';
import { PeoplePage } from './pages/people.js';
import { personView } from '../people/admin.js';

const PENDING_COOKIE = 'llmgw_oidc';
/** How long a person may take at the provider before the sign-in must start again. */
const PENDING_MAX_AGE_S = 600;

type Send = (request: FastifyRequest, reply: FastifyReply, ctx: PageContext | null, spec: PageSpec) => FastifyReply;
type Handler = (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply>;
type Page = (build: (request: FastifyRequest, ctx: PageContext) => PageSpec | Promise<PageSpec>) => Handler;
type Action = (
  act: (
    request: FastifyRequest,
    form: Record<string, string | undefined>,
    session: Session,
    ctx: PageContext,
  ) => Promise<PageSpec | { redirect: string; setCookie?: string }>,
) => Handler;

export interface SsoDeps {
  /** Null: no provider configured; the sign-in routes then answer 404 like any unknown page. */
  sso: OidcSignIn | null;
  /** Null: no store, so no people (and no sign-in: a person must be kept). */
  people: People | null;
  sessions: Sessions;
  send: Send;
  page: Page;
  action: Action;
  /** Who acts in a session's form, for the audit log (routes.tsx sessionActor). */
  sessionActor: (session: Session) => AuditActor;
  now: () => number;
  /** A local path or undefined (routes.tsx localPath). */
  localPath: (p: string | undefined) => string | undefined;
}

const PUBLIC = { config: { access: 'public' } } as const;
const SIGNED_IN = { config: { access: 'session', permission: 'self' } } as const;

export function registerSsoPages(scope: FastifyInstance, deps: SsoDeps): void {
  const { sso, people } = deps;
  if (sso && people) {
    scope.get('/login/oidc', PUBLIC, async (request, reply) => {
      const next = deps.localPath((request.query as { next?: string }).next) ?? '/';
      const { url, pending } = await sso.start(next);
      void reply.header('set-cookie', pendingCookie(pending, request.protocol === 'https'));
      return reply.redirect(url, 303);
    });

    scope.get('/login/oidc/callback', PUBLIC, async (request, reply) => {
      const pending = readPending(request);
      if (!pending)
        throw new LlmgwError(
          'LLMGW_UNAUTHORIZED',
          'the sign-in took too long or began in another browser; start it again from the login page',
        );
      const person = await sso.finish(request.url.split('?')[1] ?? '', pending);
      const actor = { identity: `person:${person.name}`, label: `dashboard:${request.ip}` };
      await people.fromSignIn(person, actor);
      const session = await deps.sessions.create(`dashboard:${request.ip}`, {
        name: person.name,
        role: person.role,
        teams: person.teams,
      });
      void reply.header('set-cookie', [
        sessionCookie(session, request.protocol === 'https'),
        pendingCookie(null, request.protocol === 'https'),
      ]);
      return reply.redirect(deps.localPath(pending.next) ?? '/', 303);
    });
  }

  // Who may use the admin listener; an admin may end a person's tokens from here.
  scope.get(
    '/people',
    { config: { access: 'session', permission: 'people.read' } },
    deps.page(async (_request, ctx) => {
      const [rows, tokens] = people ? await Promise.all([people.list(), people.tokens()]) : [[], []];
      const now = deps.now();
      const views = rows.map((r) =>
        personView(
          r,
          tokens.filter((t) => t.person === r.name),
          now,
        ),
      );
      return { title: 'People', section: '/people', refresh: true, body: <PeoplePage people={views} ctx={ctx} /> };
    }),
  );
  scope.post(
    '/people/:name/expire',
    { config: { access: 'session', permission: 'people.write' } },
    deps.action(async (request, _form, session) => {
      if (!people) throw new LlmgwError('LLMGW_NO_STORE', 'people need a store');
      const name = (request.params as { name: string }).name;
      await people.expire(name, deps.sessionActor(session));
      return { redirect: '/people' };
    }),
  );

  // A token of one's own for ctl: shown once, after a press, so a page load alone never makes one.
  scope.get(
    '/login/token',
    SIGNED_IN,
    deps.page((_request, ctx) => ({
      title: 'A token for llmgw ctl',
      refresh: false,
      body: (
        <Panel title="Token">
          <p>
            A token of your own, with your role, for <code>llmgw ctl</code>. It is shown once; paste it where{' '}
            <code>llmgw ctl login</code> asks.
          </p>
          <form method="post" action="/login/token">
            <CsrfField ctx={ctx} />
            <button type="submit" id="make-token">
              Make a token
            </button>
          </form>
        </Panel>
      ),
    })),
  );
  scope.post(
    '/login/token',
    SIGNED_IN,
    deps.action(async (_request, _form, session) => {
      if (!session.who || !people)
        return {
          title: 'No token for this session',
          refresh: false,
          status: 400,
          body: (
            <MessagePage message="This session signed in with the admin token, which is no person: use the admin token itself, or sign in as yourself." />
          ),
        };
      const actor = { identity: `person:${session.who.name}`, label: session.actor };
      const token = await people.issue(session.who.name, 'ctl login', DEFAULT_TOKEN_TTL_MS, actor, false);
      return {
        title: 'Your token',
        refresh: false,
        body: (
          <Panel title="Your token">
            <p>Paste it into llmgw ctl login. It works until {new Date(token.row.expiresMs).toISOString()}.</p>
            <p>
              <code id="token">{token.secret}</code>
            </p>
          </Panel>
        ),
      };
    }),
  );
}

/** The pending sign-in's cookie: Lax, since the provider sends the browser back from its own site; null clears it. */
function pendingCookie(pending: PendingSignIn | null, secure: boolean): string {
  const attrs = ['Path=/login/oidc', 'HttpOnly', 'SameSite=Lax', ...(secure ? ['Secure'] : [])];
  if (pending === null) return [`${PENDING_COOKIE}=`, 'Max-Age=0', ...attrs].join('; ');
  const value = Buffer.from(JSON.stringify(pending)).toString('base64url');
  return [`${PENDING_COOKIE}=${value}`, `Max-Age=${PENDING_MAX_AGE_S}`, ...attrs].join('; ');
}

function readPending(request: FastifyRequest): PendingSignIn | null {
  const raw = cookieValue(request.headers.cookie, PENDING_COOKIE);
  if (!raw) return null;
  try {
    const p = JSON.parse(Buffer.from(raw, 'base64url').toString()) as Partial<PendingSignIn>;
    if (typeof p.state !== 'string' || typeof p.nonce !== 'string' || typeof p.verifier !== 'string') return null;
    return { state: p.state, nonce: p.nonce, verifier: p.verifier, next: typeof p.next === 'string' ? p.next : '/' };
  } catch {
    return null;
  }
}
