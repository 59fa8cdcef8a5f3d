// The key store the gateway reads, with every key narrowed by its team:
// wraps the key store (memory or stored) and the team store, so neither
// knows of the other and the gateway sees one record per key with the
// limits it must enforce. Narrowed records are cached per stored record and
// team version: a lookup on the request path is two map reads.
import type { ApiKeyRecord, KeyStore } from '../../gateway/ports/index.js';
import type { TeamStore } from './store.js';
import { DEFAULT_TEAM, narrowKey } from './teams.js';

export class TeamKeys implements KeyStore {
  private narrowed = new WeakMap<ApiKeyRecord, { version: number; key: ApiKeyRecord }>();

  constructor(
    readonly inner: KeyStore,
    private readonly teams: TeamStore,
    private readonly canonical: (name: string) => string | undefined,
  ) {}

  create(record: ApiKeyRecord): Promise<void> | void {
    return this.inner.create(record);
  }

  list(): Promise<readonly ApiKeyRecord[]> | readonly ApiKeyRecord[] {
    return this.inner.list();
  }

  revoke(id: string, atMs: number): Promise<boolean> | boolean {
    return this.inner.revoke(id, atMs);
  }

  lookupByHash(hash: string): Promise<ApiKeyRecord | undefined> | ApiKeyRecord | undefined {
    const found = this.inner.lookupByHash(hash);
    if (found instanceof Promise) return found.then((k) => (k ? this.narrow(k) : k));
    return found ? this.narrow(found) : found;
  }

  onRevoked(listener: (keyId: string) => void): () => void {
    return this.inner.onRevoked(listener);
  }

  /**
   * The key with its team's limits. A key whose team is gone (deleted by
   * another control plane before this one read it) keeps only its own
   * limits: the team's deletion was refused while it held live keys.
   */
  narrow(key: ApiKeyRecord): ApiKeyRecord {
    const version = this.teams.version;
    const cached = this.narrowed.get(key);
    if (cached && cached.version === version) return cached.key;
    const out = narrowKey(key, this.teams.get(key.team ?? DEFAULT_TEAM), this.canonical);
    this.narrowed.set(key, { version, key: out });
    return out;
  }
}
