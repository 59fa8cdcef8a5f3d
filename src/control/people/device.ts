// `llmgw ctl login` through the OAuth 2.0 device authorization grant: the
// control plane asks the provider for a user code, ctl shows it with the
// verification URL, the person approves it in any browser, and the control
// plane, polling the provider itself, turns the tokens it is given into a
// person (groups mapped to a role and teams as for the dashboard) and a
// person token for ctl. The control plane, not ctl, talks to the provider's
// token endpoint: the client secret stays on it, and a token is never taken
// from the caller, so nobody can hand in a token issued to another client.
// Apart from oidc.ts (the dashboard's code flow) so each flow reads alone.
import { randomBytes } from 'node:crypto';
import * as oidc from 'openid-client';
import { LlmgwError } from '../../errors/index.js';
import type { AuditActor } from '../../http/index.js';
import type { OidcSignIn } from './oidc.js';
import { DEFAULT_TOKEN_TTL_MS, type People } from './people.js';

/** What ctl shows the person, and the handle it polls with (a secret: whoever holds it gets the token). */
export interface DeviceStart {
  handle: string;
  user_code: string;
  verification_uri: string;
  /** The URL with the code in it; absent = the provider gives none (the person types the code). */
  verification_uri_complete?: string;
  /** Seconds until the code expires. */
  expires_in: number;
  /** Seconds between polls. */
  interval: number;
}

export type DevicePoll =
  { state: 'pending' } | { state: 'done'; token: string; person: string; role: string; expires_at: string };

interface Pending {
  expiresAtMs: number;
  /** Settles when the provider answers for good: the person signed in, refused, or the code expired. */
  result: Promise<{ token: string; person: string; role: string; expiresAtMs: number }>;
  settled: boolean;
  ip: string;
}

/** Most device sign-ins waiting at once; past it a start is refused (each holds a poll loop against the provider). */
export const MAX_PENDING_DEVICE_SIGN_INS = 100;

/**
 * Most of them one address may hold: the route is public, and without it
 * one address could take every slot and lock everyone else out of ctl login.
 */
export const MAX_PENDING_DEVICE_SIGN_INS_PER_ADDRESS = 5;

export class DeviceSignIns {
  private readonly pending = new Map<string, Pending>();
  /**
   * Slots taken, per address: a sign-in waiting, and a start still asking
   * the provider (taken before its first await, so starts arriving together
   * cannot all pass the caps). No entry = none.
   */
  private readonly held = new Map<string, number>();
  private heldTotal = 0;

  constructor(
    private readonly sso: OidcSignIn,
    private readonly people: People,
    private readonly now: () => number,
  ) {}

  /** Whether the provider offers the device flow (its metadata names a device authorization endpoint). */
  async supported(): Promise<boolean> {
    try {
      return typeof (await this.sso.provider()).serverMetadata().device_authorization_endpoint === 'string';
    } catch {
      return false;
    }
  }

  async start(ip: string): Promise<DeviceStart> {
    this.sweep();
    if (this.heldTotal >= MAX_PENDING_DEVICE_SIGN_INS)
      throw new LlmgwError(
        'LLMGW_RATE_LIMITED',
        `${MAX_PENDING_DEVICE_SIGN_INS} device sign-ins are already waiting; try again in a few minutes`,
      );
    if ((this.held.get(ip) ?? 0) >= MAX_PENDING_DEVICE_SIGN_INS_PER_ADDRESS)
      throw new LlmgwError(
        'LLMGW_RATE_LIMITED',
        `${MAX_PENDING_DEVICE_SIGN_INS_PER_ADDRESS} device sign-ins from this address are already waiting; finish one (or let it expire) and try again`,
      );
    this.take(ip);
    let response: oidc.DeviceAuthorizationResponse;
    let provider: oidc.Configuration;
    try {
      provider = await this.sso.provider();
      response = await oidc.initiateDeviceAuthorization(provider, { scope: this.sso.config.scopes });
    } catch (err) {
      this.release(ip);
      throw new LlmgwError(
        'LLMGW_UPSTREAM',
        `the identity provider refused a device sign-in: ${(err as Error).message}; sign in on the dashboard's token page instead`,
        { cause: err },
      );
    }
    const handle = randomBytes(24).toString('base64url');
    const entry: Pending = {
      expiresAtMs: this.now() + response.expires_in * 1000,
      settled: false,
      ip,
      result: this.finish(provider, response, ip),
    };
    // Nobody may be polling when it fails: the failure is read at the next poll, never left unhandled.
    entry.result.then(
      () => (entry.settled = true),
      () => (entry.settled = true),
    );
    this.pending.set(handle, entry);
    return {
      handle,
      user_code: response.user_code,
      verification_uri: response.verification_uri,
      ...(response.verification_uri_complete ? { verification_uri_complete: response.verification_uri_complete } : {}),
      expires_in: response.expires_in,
      interval: response.interval ?? 5,
    };
  }

  /** Pending until the person approves; then the token, once (the handle is forgotten). Throws what the provider said. */
  async poll(handle: string): Promise<DevicePoll> {
    this.sweep();
    const entry = this.pending.get(handle);
    if (!entry)
      throw new LlmgwError(
        'LLMGW_NOT_FOUND',
        'no device sign-in has this handle (it expired, was used, or began on another control plane); run llmgw ctl login again',
      );
    if (!entry.settled) return { state: 'pending' };
    this.forget(handle, entry);
    const r = await entry.result;
    return {
      state: 'done',
      token: r.token,
      person: r.person,
      role: r.role,
      expires_at: new Date(r.expiresAtMs).toISOString(),
    };
  }

  private async finish(
    provider: oidc.Configuration,
    response: oidc.DeviceAuthorizationResponse,
    ip: string,
  ): Promise<{ token: string; person: string; role: string; expiresAtMs: number }> {
    let tokens;
    try {
      tokens = await oidc.pollDeviceAuthorizationGrant(provider, response);
    } catch (err) {
      throw new LlmgwError('LLMGW_UNAUTHORIZED', `the device sign-in ended: ${(err as Error).message}`, { cause: err });
    }
    const person = await this.sso.personOf(provider, tokens);
    const actor: AuditActor = { identity: `person:${person.name}`, label: `ctl-login:${ip}` };
    await this.people.fromSignIn(person, actor);
    const issued = await this.people.issue(person.name, 'ctl login', DEFAULT_TOKEN_TTL_MS, actor, false);
    return { token: issued.secret, person: person.name, role: person.role, expiresAtMs: issued.row.expiresMs };
  }

  /** Forgets sign-ins whose code expired and nobody came back for. */
  private sweep(): void {
    const now = this.now();
    for (const [handle, e] of this.pending) if (e.expiresAtMs + 60_000 < now && e.settled) this.forget(handle, e);
  }

  private forget(handle: string, entry: Pending): void {
    if (this.pending.delete(handle)) this.release(entry.ip);
  }

  private take(ip: string): void {
    this.heldTotal++;
    this.held.set(ip, (this.held.get(ip) ?? 0) + 1);
  }

  private release(ip: string): void {
    this.heldTotal--;
    const left = (this.held.get(ip) ?? 1) - 1;
    if (left > 0) this.held.set(ip, left);
    else this.held.delete(ip);
  }
}
