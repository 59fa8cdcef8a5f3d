// Secrets the control plane keeps for others: remote endpoints' API keys
// added through the admin API, sealed in the store by envelope encryption
// (envelope.ts) under the key in secrets_key_file (key-file.ts), opened only
// in memory to be sent upstream. Separate from keys/ (llmgw's own API keys,
// which are stored as hashes because llmgw only checks them; these llmgw
// must send, so they are encrypted instead).
import { LlmgwError } from '../../errors/index.js';
import type { RemoteCredentialRepository } from '../store/remote-credentials.js';
import { keyFingerprint, openSecret, rewrapSecret, sealSecret } from './envelope.js';

export { keyFingerprint, openSecret, rewrapSecret, sealSecret, type SealedSecret } from './envelope.js';
export { createKeyFile, readKeyFile } from './key-file.js';

export class RemoteSecrets {
  /** Opened secrets by model: each is opened once, not per request. */
  private readonly opened = new Map<string, string>();

  /** `kek` null = no secrets_key_file: a credential cannot be stored (the API says how to set one). */
  constructor(
    private readonly repo: RemoteCredentialRepository | null,
    private readonly kek: Buffer | null,
  ) {}

  /** Seals and keeps `model`'s API key. */
  async put(model: string, secret: string): Promise<void> {
    if (!this.repo) {
      throw new LlmgwError(
        'LLMGW_NO_STORE',
        `this control plane has no store, so the API key of "${model}" cannot be kept; set store to sqlite:PATH or a postgres:// URL`,
      );
    }
    if (!this.kek) {
      throw new LlmgwError(
        'LLMGW_CATALOG_INVALID',
        `model "${model}": an api_key given through the API is kept encrypted, and this control plane has no secrets_key_file; set secrets_key_file (a file with 64 hex digits, e.g. from \`openssl rand -hex 32\`, mode 600), or give api_key_file instead`,
      );
    }
    await this.repo.put(model, sealSecret(this.kek, secret));
    this.opened.set(model, secret);
  }

  /** `model`'s API key; undefined = none stored. Throws when the key file does not open it. */
  async get(model: string): Promise<string | undefined> {
    const cached = this.opened.get(model);
    if (cached !== undefined) return cached;
    const sealed = await this.repo?.get(model);
    if (!sealed) return undefined;
    if (!this.kek) {
      throw new LlmgwError(
        'LLMGW_CONFIG_INVALID',
        `the API key of "${model}" is stored encrypted, and this control plane has no secrets_key_file to open it with`,
      );
    }
    const secret = openSecret(this.kek, sealed);
    this.opened.set(model, secret);
    return secret;
  }

  /** `model`'s API key if already opened in memory (put or get before), read without waiting; undefined = not yet. */
  openedNow(model: string): string | undefined {
    return this.opened.get(model);
  }

  async delete(model: string): Promise<void> {
    this.opened.delete(model);
    await this.repo?.delete(model);
  }
}

/**
 * Re-wraps every stored secret's data key from `current` to `next`, in one
 * transaction. Returns how many there were and the two keys' fingerprints.
 */
export async function rotateSecrets(
  repo: RemoteCredentialRepository,
  current: Buffer,
  next: Buffer,
): Promise<{ count: number; from: string; to: string }> {
  const count = await repo.rewrapAll((_model, sealed) => rewrapSecret(current, next, sealed));
  return { count, from: keyFingerprint(current), to: keyFingerprint(next) };
}
