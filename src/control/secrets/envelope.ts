// Envelope encryption of the secrets the control plane keeps in its store (a
// remote endpoint's API key): each secret is sealed with a data key of its
// own (AES-256-GCM, a fresh 96-bit IV), and the data key is sealed with the
// key-encryption key the control plane reads from its key file. The store
// holds only the two sealed blobs and the key-encryption key's fingerprint,
// so a copy of the database without the key file reveals nothing, and a new
// key file re-wraps the small data keys without touching the secrets.
// Pure functions over node:crypto; the key file and the store are the edges.
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { LlmgwError } from '../../errors/index.js';

/** AES-256: a key-encryption key and every data key are 32 bytes. */
export const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
/** Bound into every seal, so a blob sealed for one purpose cannot be passed off as another's. */
const SECRET_AAD = Buffer.from('llmgw secret v1');
const DATA_KEY_AAD = Buffer.from('llmgw data key v1');

/** One secret as the store keeps it. */
export interface SealedSecret {
  /** The data key sealed under the key-encryption key: base64 of IV, tag, ciphertext. */
  readonly wrappedKey: string;
  /** The secret sealed under the data key: base64 of IV, tag, ciphertext. */
  readonly ciphertext: string;
  /** Which key-encryption key wrapped the data key (keyFingerprint). */
  readonly keyId: string;
}

/** A key-encryption key's name in the store: the first 16 hex digits of a hash of it, never the key. */
export function keyFingerprint(kek: Buffer): string {
  return createHash('sha256').update('llmgw kek fingerprint').update(kek).digest('hex').slice(0, 16);
}

function seal(key: Buffer, plain: Buffer, aad: Buffer): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(aad);
  const body = Buffer.concat([cipher.update(plain), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64');
}

function open(key: Buffer, sealed: string, aad: Buffer, what: string): Buffer {
  const raw = Buffer.from(sealed, 'base64');
  if (raw.length < IV_BYTES + TAG_BYTES) throw corrupt(what);
  const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, IV_BYTES));
  decipher.setAAD(aad);
  decipher.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
  try {
    return Buffer.concat([decipher.update(raw.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]);
  } catch {
    throw corrupt(what);
  }
}

function corrupt(what: string): LlmgwError {
  return new LlmgwError(
    'LLMGW_CONFIG_INVALID',
    `a stored secret's ${what} does not open with this key file: the store was changed, or it was sealed under another key`,
  );
}

/** Seals `secret` under a fresh data key wrapped by `kek`. */
export function sealSecret(kek: Buffer, secret: string): SealedSecret {
  const dataKey = randomBytes(KEY_BYTES);
  try {
    return {
      wrappedKey: seal(kek, dataKey, DATA_KEY_AAD),
      ciphertext: seal(dataKey, Buffer.from(secret, 'utf8'), SECRET_AAD),
      keyId: keyFingerprint(kek),
    };
  } finally {
    dataKey.fill(0);
  }
}

/** The secret inside `sealed`; refuses one wrapped under another key, saying which. */
export function openSecret(kek: Buffer, sealed: SealedSecret): string {
  const mine = keyFingerprint(kek);
  if (sealed.keyId !== mine) {
    throw new LlmgwError(
      'LLMGW_CONFIG_INVALID',
      `a stored secret is wrapped under key ${sealed.keyId}, but secrets_key_file holds key ${mine}; point secrets_key_file at the key the secrets were last rotated to`,
    );
  }
  const dataKey = open(kek, sealed.wrappedKey, DATA_KEY_AAD, 'data key');
  try {
    return open(dataKey, sealed.ciphertext, SECRET_AAD, 'ciphertext').toString('utf8');
  } finally {
    dataKey.fill(0);
  }
}

/** `sealed` with its data key re-wrapped under `next` (the secret's ciphertext is unchanged). */
export function rewrapSecret(current: Buffer, next: Buffer, sealed: SealedSecret): SealedSecret {
  if (sealed.keyId === keyFingerprint(next)) return sealed;
  if (sealed.keyId !== keyFingerprint(current)) {
    throw new LlmgwError(
      'LLMGW_CONFIG_INVALID',
      `a stored secret is wrapped under key ${sealed.keyId}, which is neither the current key file's (${keyFingerprint(current)}) nor the new one's`,
    );
  }
  const dataKey = open(current, sealed.wrappedKey, DATA_KEY_AAD, 'data key');
  try {
    return {
      wrappedKey: seal(next, dataKey, DATA_KEY_AAD),
      ciphertext: sealed.ciphertext,
      keyId: keyFingerprint(next),
    };
  } finally {
    dataKey.fill(0);
  }
}
