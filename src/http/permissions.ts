// Who may do what on the admin listener: the roles, the permissions each
// route declares when it is registered, and the person a request proved to
// be. Pure data and functions, in src/http because every part that
// registers an admin route (the admin API, keys, weights, events, the
// dashboard) declares its permission here, and none of them may import
// another; the admin guard (src/control/adminapi/auth.ts) enforces it.
import type { FastifyRequest } from 'fastify';

/** A person's role. `team-admin` acts on its own teams' keys, usage and budgets only. */
export type Role = 'admin' | 'operator' | 'viewer' | 'team-admin';

export const ROLES: readonly Role[] = ['admin', 'operator', 'viewer', 'team-admin'];

/**
 * What a route needs. `admin` is held by the admin role alone, and is what
 * a route that declared nothing needs (deny by default). `self` is held by
 * every role: a signed-in person acting on their own session or token.
 */
export const PERMISSIONS = [
  'admin',
  'self',
  'fleet.read',
  'models.write',
  'nodes.write',
  'weights.collect',
  'keys.read',
  'keys.write',
  'usage.read',
  'teams.read',
  'teams.write',
  'budgets.read',
  'budgets.write',
  'people.read',
  'people.write',
  'batches.read',
  'batches.write',
] as const;

export type Permission = (typeof PERMISSIONS)[number];

/** What each role holds. The admin role holds every permission; the others exactly these. */
export const ROLE_PERMISSIONS: Readonly<Record<Role, readonly Permission[]>> = {
  admin: PERMISSIONS,
  operator: [
    'self',
    'fleet.read',
    'models.write',
    'nodes.write',
    'weights.collect',
    'keys.read',
    'usage.read',
    'teams.read',
    'budgets.read',
    'batches.read',
    'batches.write',
  ],
  viewer: ['self', 'fleet.read', 'keys.read', 'usage.read', 'teams.read', 'budgets.read', 'batches.read'],
  // Batches, like keys, are their team's: a team-admin reads and cancels its teams' only (teamsInScope).
  'team-admin': [
    'self',
    'keys.read',
    'keys.write',
    'usage.read',
    'teams.read',
    'budgets.read',
    'budgets.write',
    'batches.read',
    'batches.write',
  ],
};

/** True when `role` holds `permission`. */
export function allows(role: Role, permission: Permission): boolean {
  return ROLE_PERMISSIONS[role].includes(permission);
}

/** The roles that hold `permission`, for a refusal that says who could. */
export function rolesHolding(permission: Permission): Role[] {
  return ROLES.filter((r) => allows(r, permission));
}

export function isRole(value: unknown): value is Role {
  return typeof value === 'string' && (ROLES as readonly string[]).includes(value);
}

export function isPermission(value: unknown): value is Permission {
  return typeof value === 'string' && (PERMISSIONS as readonly string[]).includes(value);
}

/**
 * A route's options declaring the permission it needs: `app.get(url,
 * needs('fleet.read'), handler)`. `config` is kept (JSON wording, access).
 */
export function needs<C extends object = object>(
  permission: Permission,
  config?: C,
): { config: C & { permission: Permission } } {
  return { config: { ...(config ?? ({} as C)), permission } };
}

/** How a person's token begins, so a refusal can say which kind of token was wrong. An admin token is whatever the operator chose. */
export const PERSON_TOKEN_PREFIX = 'llmgw-p-';

/** Who a request proved to be on the admin listener. */
export interface Principal {
  /** The audit log's identity: `admin-token`, `person:alice`, `dashboard:<hash>`, `loopback-no-token`. */
  readonly identity: string;
  /** The person's name; null = the admin token (or no token on a loopback listener), which is no person. */
  readonly person: string | null;
  readonly role: Role;
  /** The teams a team-admin acts for; empty for every other role (they are not scoped to teams). */
  readonly teams: readonly string[];
}

const principals = new WeakMap<FastifyRequest, Principal>();

/** Set by the admin guard once a request proved who it is. */
export function setPrincipal(request: FastifyRequest, principal: Principal): void {
  principals.set(request, principal);
}

/** Who the request proved to be; null on a listener without the admin guard (a unit test's). */
export function principalOf(request: FastifyRequest): Principal | null {
  return principals.get(request) ?? null;
}

/**
 * The teams a request may act on: null = every team (every role but
 * team-admin, and a request on a listener without the guard); otherwise
 * exactly these. Keys, usage and budgets routes narrow what they list and
 * refuse what they change through this one function.
 */
export function teamsInScope(request: FastifyRequest): readonly string[] | null {
  const p = principalOf(request);
  if (!p || p.role !== 'team-admin') return null;
  return p.teams;
}

/** True when the request may act on `team`. */
export function mayActOnTeam(request: FastifyRequest, team: string): boolean {
  const scope = teamsInScope(request);
  return scope === null || scope.includes(team);
}
