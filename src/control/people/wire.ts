// People on a control plane: the store's people behind the admin guard, and
// their routes. One call from control-plane.ts, so the assembly there stays
// a list of parts.
import type { FastifyInstance } from 'fastify';
import type { AdminGuard } from '../adminapi/auth.js';
import type { Store } from '../store/index.js';
import { PeopleRepository } from '../store/people.js';
import { registerPeopleAdmin } from './admin.js';
import { People } from './people.js';
import { OidcSignIn } from './oidc.js';
import { DeviceSignIns } from './device.js';
import type { OidcConfig } from '../config/oidc.js';

export interface PeopleWiring {
  guard: AdminGuard;
  /** Null: no store, so no people; only the admin token opens the admin listener. */
  store: Store | null;
  now: () => number;
  /** Single sign-on; null = none. */
  oidc: OidcConfig | null;
  /** Whether a team exists (teams are referenced by name); absent = not checked. */
  teamExists?: (name: string) => boolean | Promise<boolean>;
}

/**
 * Lets people's tokens through the guard and mounts their routes; returns
 * the People (null without a store) and the sign-in (null without a
 * provider, or without a store to keep the people it signs in), for the
 * dashboard.
 */
export function wirePeople(app: FastifyInstance, w: PeopleWiring): { people: People | null; sso: OidcSignIn | null } {
  const people = w.store
    ? new People({
        repo: new PeopleRepository(w.store.connection),
        now: w.now,
        ...(w.teamExists ? { teamExists: w.teamExists } : {}),
      })
    : null;
  if (people) w.guard.acceptPeople(people);
  const sso = people && w.oidc ? new OidcSignIn(w.oidc) : null;
  // ctl login's device flow goes through the same provider and mapping as the dashboard's sign-in.
  const device = people && sso ? new DeviceSignIns(sso, people, w.now) : null;
  registerPeopleAdmin(app, { people, now: w.now, sso: sso !== null, ...(device ? { device } : {}) });
  return { people, sso };
}
