// A real OpenID Provider on loopback (the oidc-provider package, in the
// test's own process) with one client, `llmgw`, and a real `llmgw control`
// signing in through it: what every SSO end-to-end test starts from. Apart
// from the tests so each reads as its flow (the dashboard's code flow, ctl
// login's device flow), not as the provider's setup, and so the provider's
// settings cannot drift between them.
import { createServer, type Server } from 'node:http';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
// @ts-expect-error -- oidc-provider ships no type declarations
import Provider from 'oidc-provider';
import { freePort, startControl } from './processes.js';

export interface SsoFleetOptions {
  /** Names the test's tokens, secrets and temporary folder (`sso`, `device`). */
  name: string;
  /** The email every account signs in as: any login name on the provider's development forms is this person. */
  person: string;
  /** The groups claim every account carries. */
  groups: readonly string[];
  /** `--oidc-group-roles`: `group=role,…`. */
  groupRoles: string;
  /** The device authorization grant is on (ctl login's device flow); absent = the code flow only. */
  deviceFlow?: boolean;
}

export interface SsoFleet {
  /** The provider's URL. */
  issuer: string;
  adminUrl: string;
  /** The control plane's admin token. */
  admin: string;
  /** Stops the provider (the control plane is stopped by stopAll). */
  close(): Promise<void>;
}

export async function startSsoFleet(o: SsoFleetOptions): Promise<SsoFleet> {
  const admin = `e2e-${o.name}-admin-token-0123456789abcdef`;
  const clientSecret = `e2e-${o.name}-client-secret-0123456789abcdef`;
  const opPort = await freePort();
  const adminPort = await freePort();
  const issuer = `http://127.0.0.1:${opPort}`;
  const redirect = `http://127.0.0.1:${adminPort}/login/oidc/callback`;
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: 'llmgw',
        client_secret: clientSecret,
        redirect_uris: [redirect],
        grant_types: o.deviceFlow
          ? ['authorization_code', 'urn:ietf:params:oauth:grant-type:device_code']
          : ['authorization_code'],
        response_types: ['code'],
      },
    ],
    ...(o.deviceFlow ? { features: { deviceFlow: { enabled: true } } } : {}),
    claims: { openid: ['sub'], email: ['email'], groups: ['groups'] },
    findAccount: (_ctx: unknown, id: string) => ({
      accountId: id,
      claims: () => ({ sub: id, email: o.person, groups: [...o.groups] }),
    }),
    cookies: { keys: [`e2e-${o.name}-cookie-key-0123456789`] },
  });
  const op: Server = createServer(provider.callback());
  await new Promise<void>((resolve) => op.listen(opPort, '127.0.0.1', resolve));
  const dir = mkdtempSync(join(tmpdir(), `llmgw-e2e-${o.name}-`));
  const control = await startControl([
    '--store',
    `sqlite:${join(dir, 'db')}`,
    '--admin-token',
    admin,
    '--admin-addr',
    `127.0.0.1:${adminPort}`,
    '--oidc-issuer',
    issuer,
    '--oidc-client-id',
    'llmgw',
    '--oidc-client-secret',
    clientSecret,
    '--oidc-redirect-url',
    redirect,
    '--oidc-scopes',
    'openid email groups',
    '--oidc-group-roles',
    o.groupRoles,
    '--oidc-allow-insecure',
    'true',
    '--log-level',
    'warn',
  ]);
  return {
    issuer,
    adminUrl: control.urls.admin,
    admin,
    close: () => new Promise<void>((resolve) => op.close(() => resolve())),
  };
}
