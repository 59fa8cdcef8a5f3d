// Signing in through the company's OpenID Connect provider: the
// authorization code flow with PKCE (openid-client), and what the provider
// says about a person turned into a person with a role. The routes that
// carry a browser through it are the dashboard's (dashboard/sso-routes.tsx);
// this is the protocol and the mapping, so both stay readable on their own.
import * as oidc from 'openid-client';
import { LlmgwError } from '../../errors/index.js';
import { type OidcConfig, roleOfGroups } from '../config/oidc.js';
import type { PersonInput } from './people.js';

/** What the browser carries between leaving for the provider and coming back (in a short-lived cookie). */
export interface PendingSignIn {
  state: string;
  nonce: string;
  verifier: string;
  /** Where to go after: a local path. */
  next: string;
}

export class OidcSignIn {
  private discovered: Promise<oidc.Configuration> | null = null;

  constructor(readonly config: OidcConfig) {}

  /** The provider's configuration, discovered once; a failed discovery is tried again next time. */
  provider(): Promise<oidc.Configuration> {
    this.discovered ??= oidc
      .discovery(
        new URL(this.config.issuer),
        this.config.clientId,
        this.config.clientSecret ?? undefined,
        this.config.clientSecret === null ? oidc.None() : undefined,
        this.config.allowInsecure ? { execute: [oidc.allowInsecureRequests] } : undefined,
      )
      .catch((err: unknown) => {
        this.discovered = null;
        throw new LlmgwError(
          'LLMGW_UPSTREAM',
          `cannot read the identity provider's configuration at ${this.config.issuer}: ${(err as Error).message}`,
          { cause: err },
        );
      });
    return this.discovered;
  }

  /** Where to send the browser, and what to keep until it comes back. */
  async start(next: string): Promise<{ url: string; pending: PendingSignIn }> {
    const provider = await this.provider();
    const verifier = oidc.randomPKCECodeVerifier();
    const pending: PendingSignIn = { state: oidc.randomState(), nonce: oidc.randomNonce(), verifier, next };
    const url = oidc.buildAuthorizationUrl(provider, {
      redirect_uri: this.config.redirectUrl,
      scope: this.config.scopes,
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state: pending.state,
      nonce: pending.nonce,
    });
    return { url: url.href, pending };
  }

  /**
   * The person the provider signed in, from the callback's query: the code
   * exchanged (state, nonce and PKCE checked by openid-client), the claims
   * of the ID token and, when the groups are not there, of userinfo.
   * Throws LLMGW_FORBIDDEN when none of their groups maps to a role.
   */
  async finish(query: string, pending: PendingSignIn): Promise<PersonInput> {
    const provider = await this.provider();
    const current = new URL(this.config.redirectUrl);
    current.search = query;
    let tokens;
    try {
      tokens = await oidc.authorizationCodeGrant(provider, current, {
        pkceCodeVerifier: pending.verifier,
        expectedState: pending.state,
        expectedNonce: pending.nonce,
      });
    } catch (err) {
      throw new LlmgwError(
        'LLMGW_UNAUTHORIZED',
        `the identity provider's answer was refused: ${(err as Error).message}`,
        {
          cause: err,
        },
      );
    }
    return this.personOf(provider, tokens);
  }

  /**
   * The person a token endpoint's answer names: the ID token's claims (which
   * openid-client checked: issuer, audience, expiry) and, when the groups or
   * the name are not there, userinfo's for the same subject.
   */
  async personOf(
    provider: oidc.Configuration,
    tokens: oidc.TokenEndpointResponse & oidc.TokenEndpointResponseHelpers,
  ): Promise<PersonInput> {
    let claims: Record<string, unknown> = { ...(tokens.claims() ?? {}) };
    if (!(this.config.groupsClaim in claims) || !(this.config.nameClaim in claims)) {
      const info = await oidc.fetchUserInfo(
        provider,
        tokens.access_token,
        typeof claims.sub === 'string' ? claims.sub : oidc.skipSubjectCheck,
      );
      claims = { ...info, ...claims };
    }
    return personOfClaims(claims, this.config);
  }
}

/** A person from the provider's claims: named by the name claim (then preferred_username, then sub), role from groups. Pure. */
export function personOfClaims(claims: Record<string, unknown>, config: OidcConfig): PersonInput {
  const name = [claims[config.nameClaim], claims.preferred_username, claims.sub].find(
    (v): v is string => typeof v === 'string' && v.length > 0,
  );
  if (!name) throw new LlmgwError('LLMGW_UNAUTHORIZED', 'the identity provider named nobody (no sub claim)');
  const raw = claims[config.groupsClaim];
  const groups = Array.isArray(raw)
    ? raw.filter((g): g is string => typeof g === 'string')
    : typeof raw === 'string'
      ? [raw]
      : [];
  const mapped = roleOfGroups(groups, config.groupRoles);
  if (!mapped)
    throw new LlmgwError(
      'LLMGW_FORBIDDEN',
      `${name} is in no group that oidc_group_roles maps to a role (their ${config.groupsClaim}: ${groups.join(', ') || 'none'}); ask an admin`,
    );
  return { name, role: mapped.role, teams: mapped.teams };
}
