// Teams as the control plane builds them: the team store (memory or
// stored), the key store the gateway reads (every key narrowed by its
// team), the key route's check and the team routes. One call from
// control-plane.ts, so that file names teams once.
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { KeyStore } from '../../gateway/ports/index.js';
import type { Store } from '../store/index.js';
import { checkKeyTeam, registerTeamAdmin } from './admin.js';
import { MemoryTeams, StoredTeams, type TeamStore } from './store.js';
import { TeamKeys } from './team-keys.js';
import type { KeyAsk } from './teams.js';

export interface Teams {
  readonly store: TeamStore;
  /** What the gateway and the key routes read: every key narrowed by its team. */
  readonly keys: TeamKeys;
  /** For the key route: throws when the team is unknown or the key asks more than it allows. */
  readonly checkTeam: (team: string, ask: KeyAsk) => void;
  /** Reads teams and keys again (another control plane changed them). */
  reload(): Promise<void>;
  register(adminApp: FastifyInstance, now: () => number): void;
}

export async function openTeams(
  store: Store | null,
  keys: KeyStore & { reload?(): Promise<void> },
  catalog: { resolve(name: string): { name: string } | undefined },
  logger: Logger,
): Promise<Teams> {
  const teams: TeamStore = store ? await StoredTeams.create(store.connection) : new MemoryTeams();
  const canonical = (name: string) => catalog.resolve(name)?.name;
  const teamKeys = new TeamKeys(keys, teams, canonical);
  return {
    store: teams,
    keys: teamKeys,
    checkTeam: checkKeyTeam(teams, canonical),
    async reload() {
      if (teams instanceof StoredTeams) await teams.reload();
      await keys.reload?.();
    },
    register(adminApp, now) {
      registerTeamAdmin(adminApp, {
        teams,
        keys: () => keys.list(),
        now,
        canonical,
        audit: (actor, action, target, detail) =>
          void store?.audit
            .append({ actor, action, target, detail })
            .catch((err: unknown) => logger.error({ err }, 'audit write failed')),
      });
    },
  };
}
