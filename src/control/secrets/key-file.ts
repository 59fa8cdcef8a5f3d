// The key-encryption key's file: 32 random bytes, written as 64 hex digits
// (one line), readable by its owner only. Read once when the control plane
// starts; `llmgw control rotate-secrets --new-key-file` writes a new one.
import { chmodSync, existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { LlmgwError } from '../../errors/index.js';
import { KEY_BYTES } from './envelope.js';

/** Reads the key in `path`; refuses a file others may read, or one that is not 64 hex digits. */
export function readKeyFile(path: string): Buffer {
  let text: string;
  try {
    text = readFileSync(path, 'utf8').trim();
  } catch (err) {
    throw new LlmgwError('LLMGW_CONFIG_INVALID', `cannot read secrets_key_file ${path}: ${(err as Error).message}`);
  }
  if (process.platform !== 'win32' && (statSync(path).mode & 0o077) !== 0) {
    throw new LlmgwError(
      'LLMGW_CONFIG_INVALID',
      `secrets_key_file ${path} may be read by others; run chmod 600 ${path}`,
    );
  }
  if (!/^[0-9a-f]{64}$/i.test(text)) {
    throw new LlmgwError(
      'LLMGW_CONFIG_INVALID',
      `secrets_key_file ${path} must hold 64 hex digits (32 random bytes), e.g. from \`openssl rand -hex 32\``,
    );
  }
  return Buffer.from(text, 'hex');
}

/** Writes a new random key to `path` (owner-only); refuses to overwrite one. Returns it. */
export function createKeyFile(path: string): Buffer {
  if (existsSync(path)) {
    throw new LlmgwError('LLMGW_CONFIG_INVALID', `${path} exists already; a key file is never overwritten`);
  }
  const key = randomBytes(KEY_BYTES);
  writeFileSync(path, `${key.toString('hex')}\n`, { mode: 0o600, flag: 'wx' });
  chmodSync(path, 0o600);
  return key;
}
