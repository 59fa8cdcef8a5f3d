// Envelope encryption of stored secrets: what the store holds never contains
// the secret, a blob opens only under the key that wrapped it, and a rotation
// re-wraps the data key so the new key opens it and the old one no longer does.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { keyFingerprint, openSecret, rewrapSecret, sealSecret } from './envelope.js';
import { createKeyFile, readKeyFile } from './key-file.js';

const CANARY = 'sk-canary-7f3a9c1e5b';

describe('envelope encryption', () => {
  it('seals a secret so that no stored field holds it, and opens it under the same key', () => {
    const kek = randomBytes(32);
    const sealed = sealSecret(kek, CANARY);
    const stored = JSON.stringify(sealed);
    expect(stored, 'the sealed form holds the secret in plain text').not.toContain(CANARY);
    expect(stored).not.toContain(Buffer.from(CANARY).toString('base64'));
    expect(sealed.keyId).toBe(keyFingerprint(kek));
    expect(openSecret(kek, sealed)).toBe(CANARY);
  });

  it('uses a fresh data key and IV for every seal', () => {
    const kek = randomBytes(32);
    const a = sealSecret(kek, CANARY);
    const b = sealSecret(kek, CANARY);
    expect(a.ciphertext).not.toBe(b.ciphertext);
    expect(a.wrappedKey).not.toBe(b.wrappedKey);
  });

  it('refuses another key, naming the key the secret needs', () => {
    const sealed = sealSecret(randomBytes(32), CANARY);
    expect(() => openSecret(randomBytes(32), sealed)).toThrow(/wrapped under key [0-9a-f]{16}/);
  });

  it('refuses a blob that was tampered with', () => {
    const kek = randomBytes(32);
    const sealed = sealSecret(kek, CANARY);
    const raw = Buffer.from(sealed.ciphertext, 'base64');
    raw[raw.length - 1]! ^= 1;
    expect(() => openSecret(kek, { ...sealed, ciphertext: raw.toString('base64') })).toThrow(/does not open/);
  });

  it('rotation re-wraps the data key: the new key opens it, the old no longer does, the ciphertext stays', () => {
    const old = randomBytes(32);
    const next = randomBytes(32);
    const sealed = sealSecret(old, CANARY);
    const rotated = rewrapSecret(old, next, sealed);
    expect(rotated.ciphertext).toBe(sealed.ciphertext);
    expect(rotated.keyId).toBe(keyFingerprint(next));
    expect(openSecret(next, rotated)).toBe(CANARY);
    expect(() => openSecret(old, rotated)).toThrow();
    expect(rewrapSecret(old, next, rotated), 'a second run of the same rotation changes nothing').toBe(rotated);
  });
});

describe('key file', () => {
  it('creates an owner-only key that reads back, and never overwrites one', () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-kek-'));
    const path = join(dir, 'secrets.key');
    const key = createKeyFile(path);
    expect(readKeyFile(path).equals(key)).toBe(true);
    expect(() => createKeyFile(path)).toThrow(/never overwritten/);
  });

  it('refuses a key file others may read, and one that is not 64 hex digits', () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-kek-'));
    const open = join(dir, 'open.key');
    writeFileSync(open, 'ab'.repeat(32));
    chmodSync(open, 0o644);
    expect(() => readKeyFile(open)).toThrow(/chmod 600/);
    const short = join(dir, 'short.key');
    writeFileSync(short, 'abcd', { mode: 0o600 });
    expect(() => readKeyFile(short)).toThrow(/64 hex digits/);
  });
});
