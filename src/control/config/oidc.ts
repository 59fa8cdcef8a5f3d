// The keys of signing in through the company's identity provider (OpenID
// Connect) and how they compile: the provider, the client, and which of the
// provider's groups make which role. Apart from index.ts so one feature's
// keys read together; index.ts spreads them into the one schema.
import { z } from 'zod';
import { isRole, type Role } from '../../http/permissions.js';

/** Defaults of the OIDC keys; a key missing here has no value when absent. */
export const OIDC_DEFAULTS = Object.freeze({
  /** What is asked of the provider; `groups` must come back in the ID token or userinfo for roles to be mapped. */
  oidc_scopes: 'openid profile email groups',
  /** The claim that lists a person's groups. */
  oidc_groups_claim: 'groups',
  /** The claim that names a person (then preferred_username, then sub). */
  oidc_name_claim: 'email',
});

const list = z.union([z.string(), z.array(z.string())]);

export const OIDC_OPTIONS = {
  /** The provider's issuer URL (its /.well-known/openid-configuration is read at start). Absent = no single sign-on. */
  oidc_issuer: z.string().url().optional(),
  oidc_client_id: z.string().min(1).optional(),
  /** The client's secret; absent = a public client (PKCE alone). */
  oidc_client_secret: z.string().min(1).optional(),
  oidc_client_secret_file: z.string().min(1).optional(),
  /** Where the provider sends the browser back: this admin listener's /login/oidc/callback as browsers reach it. */
  oidc_redirect_url: z.string().url().optional(),
  oidc_scopes: list.default(OIDC_DEFAULTS.oidc_scopes),
  oidc_groups_claim: z.string().min(1).default(OIDC_DEFAULTS.oidc_groups_claim),
  oidc_name_claim: z.string().min(1).default(OIDC_DEFAULTS.oidc_name_claim),
  /**
   * Which group makes which role: `group=role`, a list or comma-separated;
   * `group=team-admin:team` makes a team-admin of that team. A person in
   * several groups gets the strongest role (admin, operator, viewer,
   * team-admin) and every team named. In no mapped group = refused.
   */
  oidc_group_roles: list.optional(),
  /** True: http:// issuers are allowed (loopback tests only). Absent = false. */
  oidc_allow_insecure: z.union([z.boolean(), z.enum(['true', 'false'])]).optional(),
};

export interface GroupRole {
  readonly role: Role;
  /** For team-admin: the team; null otherwise. */
  readonly team: string | null;
}

export interface OidcConfig {
  readonly issuer: string;
  readonly clientId: string;
  readonly clientSecret: string | null;
  readonly redirectUrl: string;
  readonly scopes: string;
  readonly groupsClaim: string;
  readonly nameClaim: string;
  readonly groupRoles: ReadonlyMap<string, GroupRole>;
  readonly allowInsecure: boolean;
}

interface OidcInput {
  oidc_issuer?: string | undefined;
  oidc_client_id?: string | undefined;
  oidc_client_secret?: string | undefined;
  oidc_client_secret_file?: string | undefined;
  oidc_redirect_url?: string | undefined;
  oidc_scopes: string | string[];
  oidc_groups_claim: string;
  oidc_name_claim: string;
  oidc_group_roles?: string | string[] | undefined;
  oidc_allow_insecure?: boolean | 'true' | 'false' | undefined;
}

/** The compiled OIDC settings, or null when no issuer is set; problems are pushed, each naming its key. */
export function compileOidc(
  o: OidcInput,
  secret: (value: string | undefined, file: string | undefined, key: string) => string | null,
  problems: string[],
): OidcConfig | null {
  if (!o.oidc_issuer) {
    if (o.oidc_client_id || o.oidc_group_roles) problems.push('oidc_client_id and oidc_group_roles need oidc_issuer');
    return null;
  }
  if (!o.oidc_client_id) problems.push('oidc_issuer is set, so oidc_client_id is needed too');
  if (!o.oidc_redirect_url)
    problems.push('oidc_issuer is set, so oidc_redirect_url is needed: https://<admin address>/login/oidc/callback');
  const groupRoles = new Map<string, GroupRole>();
  const entries = (typeof o.oidc_group_roles === 'string' ? o.oidc_group_roles.split(',') : (o.oidc_group_roles ?? []))
    .map((e) => e.trim())
    .filter(Boolean);
  for (const entry of entries) {
    const m = /^([^=]+)=([a-z-]+)(?::(.+))?$/.exec(entry);
    const role = m?.[2];
    if (!m || !isRole(role) || (role === 'team-admin') !== (m[3] !== undefined)) {
      problems.push(
        `oidc_group_roles: "${entry}" is not group=role (admin, operator, viewer) or group=team-admin:team`,
      );
      continue;
    }
    groupRoles.set(m[1]!.trim(), { role, team: m[3]?.trim() ?? null });
  }
  if (entries.length === 0) problems.push('oidc_issuer is set, so oidc_group_roles is needed: nobody could sign in');
  return {
    issuer: o.oidc_issuer,
    clientId: o.oidc_client_id ?? '',
    clientSecret: secret(o.oidc_client_secret, o.oidc_client_secret_file, 'oidc_client_secret'),
    redirectUrl: o.oidc_redirect_url ?? '',
    scopes: (Array.isArray(o.oidc_scopes) ? o.oidc_scopes : o.oidc_scopes.split(/[ ,]+/)).filter(Boolean).join(' '),
    groupsClaim: o.oidc_groups_claim,
    nameClaim: o.oidc_name_claim,
    groupRoles,
    allowInsecure: o.oidc_allow_insecure === true || o.oidc_allow_insecure === 'true',
  };
}

const STRENGTH: readonly Role[] = ['admin', 'operator', 'viewer', 'team-admin'];

/**
 * The role and teams a person's groups give: the strongest role among
 * their mapped groups, and for team-admin every team named. Null = no
 * mapped group, so they may not sign in. Pure: table-tested.
 */
export function roleOfGroups(
  groups: readonly string[],
  map: ReadonlyMap<string, GroupRole>,
): { role: Role; teams: string[] } | null {
  const found = groups.map((g) => map.get(g)).filter((r): r is GroupRole => r !== undefined);
  if (found.length === 0) return null;
  const role = STRENGTH.find((r) => found.some((f) => f.role === r))!;
  const teams = role === 'team-admin' ? [...new Set(found.map((f) => f.team).filter((t): t is string => !!t))] : [];
  return { role, teams };
}
