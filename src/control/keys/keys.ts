// API keys for the client listener: issued once, kept only as SHA-256 hashes
// plus a short display prefix, so a leaked store or log line never yields a
// usable key. The KeyStore interface is what the router needs; the control
// plane backs it with its store (stored.ts), tests and loopback setups with
// MemoryKeyStore.
import { randomBytes, randomUUID } from 'node:crypto';
import { actorText, type AuditActor } from '../../http/index.js';
import { hashKey, type ApiKeyRecord, type KeyStore, type PriorityClass } from '../../gateway/ports/index.js';

export { hashKey, type ApiKeyRecord, type KeyStore } from '../../gateway/ports/index.js';

/** Listeners of revocations, each called once per revoked key; one that throws does not stop the others. */
export class RevocationListeners {
  private readonly listeners = new Set<(keyId: string) => void>();

  add(listener: (keyId: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  revoked(keyId: string): void {
    for (const listener of [...this.listeners]) {
      try {
        listener(keyId);
      } catch {
        // A listener's fault is its own: the revocation itself stands, and the others still hear of it.
      }
    }
  }
}

export class MemoryKeyStore implements KeyStore {
  private readonly byId = new Map<string, ApiKeyRecord>();
  private readonly byHash = new Map<string, ApiKeyRecord>();
  private readonly revocations = new RevocationListeners();

  create(record: ApiKeyRecord): void {
    this.byId.set(record.id, record);
    this.byHash.set(record.hash, record);
  }

  /** Oldest first. */
  list(): readonly ApiKeyRecord[] {
    return [...this.byId.values()].sort((a, b) => a.createdAtMs - b.createdAtMs);
  }

  revoke(id: string, atMs: number): boolean {
    const old = this.byId.get(id);
    if (!old) return false;
    const revoked = { ...old, revokedAtMs: old.revokedAtMs ?? atMs };
    this.byId.set(id, revoked);
    this.byHash.set(revoked.hash, revoked);
    if (old.revokedAtMs === null) this.revocations.revoked(id);
    return true;
  }

  lookupByHash(hash: string): ApiKeyRecord | undefined {
    return this.byHash.get(hash);
  }

  /** The key with this id; undefined when there is none. */
  get(id: string): ApiKeyRecord | undefined {
    return this.byId.get(id);
  }

  onRevoked(listener: (keyId: string) => void): () => void {
    return this.revocations.add(listener);
  }
}

const SECRET_PREFIX = 'llmgw-';
/** Characters of the secret kept for display: "llmgw-" and six more, 36 bits: tells keys apart, guesses nothing. */
const DISPLAY_PREFIX_CHARS = SECRET_PREFIX.length + 6;

export interface NewKey {
  name: string;
  allowedModels?: readonly string[] | null;
  requestsPerMinute?: number | null;
  tokensPerMinute?: number | null;
  expiresAtMs?: number | null;
  /** The team it belongs to; absent = none named (a store without teams reads it as `default`). */
  team?: string;
  /** Its requests' class when a model queues them; absent = interactive. */
  priority?: PriorityClass;
}

/** Creates a key and stores its hash. The secret is in the answer and nowhere else, ever. */
export async function issueKey(
  keys: KeyStore,
  input: NewKey,
  nowMs: number,
  actor: string | AuditActor,
): Promise<{ record: ApiKeyRecord; secret: string }> {
  const secret = SECRET_PREFIX + randomBytes(32).toString('base64url');
  const record: ApiKeyRecord = {
    id: `key_${randomUUID().replace(/-/g, '').slice(0, 16)}`,
    name: input.name,
    prefix: secret.slice(0, DISPLAY_PREFIX_CHARS),
    hash: hashKey(secret),
    allowedModels: input.allowedModels ?? null,
    requestsPerMinute: input.requestsPerMinute ?? null,
    tokensPerMinute: input.tokensPerMinute ?? null,
    expiresAtMs: input.expiresAtMs ?? null,
    createdAtMs: nowMs,
    createdBy: actorText(actor),
    revokedAtMs: null,
    ...(input.team === undefined ? {} : { team: input.team }),
    ...(input.priority === 'batch' ? { priority: input.priority } : {}),
  };
  await keys.create(record);
  return { record, secret };
}

/** A key as the admin API shows it: no hash (it is not secret, but nobody needs it). */
export function keyView(k: ApiKeyRecord, nowMs: number): Record<string, unknown> {
  const state =
    k.revokedAtMs !== null ? 'revoked' : k.expiresAtMs !== null && k.expiresAtMs <= nowMs ? 'expired' : 'active';
  return {
    id: k.id,
    name: k.name,
    prefix: k.prefix,
    ...(k.team === undefined ? {} : { team: k.team }),
    priority: k.priority ?? 'interactive',
    state,
    allowed_models: k.allowedModels,
    requests_per_minute: k.requestsPerMinute,
    tokens_per_minute: k.tokensPerMinute,
    expires_at: k.expiresAtMs === null ? null : new Date(k.expiresAtMs).toISOString(),
    created_at: new Date(k.createdAtMs).toISOString(),
    created_by: k.createdBy,
    revoked_at: k.revokedAtMs === null ? null : new Date(k.revokedAtMs).toISOString(),
  };
}
