// The secrets that tie a node to this fleet, kept apart from the inventory's
// bookkeeping so that what is stored and what is derived can be read (and
// tested) in one place. The store holds only hashes and nonces: a copy of
// the store file alone lets nobody act as a node or call a node's
// management API. The management token is derived from a key that comes
// from the join token (every control plane of one fleet has it), so any
// instance can present the plaintext to an agent without the store ever
// holding it.
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

export function sha256Hex(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

/** Constant-time equality of a secret against a stored SHA-256 hex; false for an empty or malformed stored hash. */
export function matchesHash(secret: string, storedHex: string | null): boolean {
  if (!storedHex || storedHex.length !== 64) return false;
  const want = Buffer.from(storedHex, 'hex');
  const got = createHash('sha256').update(secret).digest();
  return want.length === got.length && timingSafeEqual(want, got);
}

/** Equality of two secrets in time that does not depend on where they differ (only on their length). */
export function constantTimeEqual(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

/**
 * The key management tokens are derived with. From the join token, so the
 * store alone is not enough to compute them; with no join token (joining
 * closed) the key is a constant and the derived tokens are only as secret
 * as the nonces in the store: a control plane that accepts no agents has
 * only the nodes it already knows, and rotating in a join token re-derives
 * them (see Inventory.heartbeat).
 */
export function mgmtKey(joinToken: string | null): Buffer {
  return createHmac('sha256', 'llmgw-mgmt-key')
    .update(joinToken ?? '')
    .digest();
}

export function deriveMgmtToken(key: Buffer, nodeId: string, nonce: string): string {
  return createHmac('sha256', key).update(`llmgw-mgmt\0${nodeId}\0${nonce}`).digest('base64url');
}

export function newNonce(): string {
  return randomBytes(16).toString('base64url');
}

/** Per-node join tokens carry a prefix so that a log or a ticket that shows one says what it is. */
export const NODE_JOIN_TOKEN_PREFIX = 'llmgw-njt-';

export function newNodeJoinToken(): string {
  return `${NODE_JOIN_TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
}

/**
 * The GPUs a node was approved with, as the part of its report that decides
 * what it may run: how many and of which classes. A fingerprint that
 * changes means a GPU was added, removed or swapped for another class, or a
 * different machine answers under this node id. Null = the report said
 * nothing of GPUs (unknown: no change can be told from it).
 */
export function hardwareFingerprint(gpus: readonly { class?: string | undefined }[] | undefined): string | null {
  if (gpus === undefined) return null;
  const classes = gpus.map((g) => g.class ?? 'unknown').sort();
  return `${gpus.length} gpu${gpus.length === 1 ? '' : 's'}${classes.length ? `: ${classes.join(', ')}` : ''}`;
}
