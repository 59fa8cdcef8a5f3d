// The wire shapes of people, their tokens and "who am I" (src/control/people),
// apart from types.ts so one feature's shapes read together.

/** One of a person's tokens: never the secret, only how it begins. */
export interface PersonTokenView {
  /** `llmgw-p-` and six more characters. */
  prefix: string;
  /** Where it came from: created, rotated, ctl login. */
  label: string;
  created_at: string;
  expires_at: string;
  state: 'active' | 'expired';
}

/** A person: a named admin identity with a role. */
export interface PersonView {
  name: string;
  /** admin, operator, viewer or team-admin. */
  role: string;
  /** A team-admin's teams; [] for every other role. */
  teams: string[];
  /** `local` (ctl people create) or `oidc` (signed in through the identity provider). */
  source: string;
  created_at: string;
  created_by: string;
  tokens: PersonTokenView[];
}

/** A person just made, or a token just rotated: the secret, shown this once. */
export interface PersonTokenIssuedView {
  token: string;
  note: string;
}

export interface NewPerson {
  name: string;
  role: 'admin' | 'operator' | 'viewer' | 'team-admin';
  /** A team-admin's teams; leave out for other roles. */
  teams?: string[];
  /** How long the first token lives, like 30d; absent = 90d. */
  expires_in?: string;
}

/** Who the caller is, as the admin listener sees it. */
export interface WhoAmIView {
  /** What the audit log records: admin-token, person:<name>, dashboard:<hash>, loopback-no-token. */
  identity: string;
  /** Null = the admin token, which is no person. */
  person: string | null;
  role: string;
  teams: string[];
  /** Every permission the role holds. */
  permissions: string[];
}

/** The dashboard's answer to `llmgw ctl login` without a device flow: what the page shows. */
export interface LoginInfoView {
  /** OpenID Connect sign-in is configured on this control plane. */
  sso: boolean;
  /** Where a person signs in to get a token to paste; null = no SSO. */
  token_page: string | null;
  /** The provider offers the device flow: POST /api/v1/login/device starts one. */
  device_authorization: boolean;
}

/** POST /api/v1/login/device: what to show the person, and the handle to poll with (a secret). */
export interface DeviceLoginView {
  handle: string;
  user_code: string;
  verification_uri: string;
  /** The URL with the code filled in; absent = the provider gives none. */
  verification_uri_complete?: string;
  /** Seconds until the code expires. */
  expires_in: number;
  /** Seconds between polls. */
  interval: number;
}

/** POST /api/v1/login/device/{handle}: pending, or the person's new token (given once). */
export type DeviceLoginPollView =
  { state: 'pending' } | { state: 'done'; token: string; person: string; role: string; expires_at: string };
