// `llmgw control rotate-secrets --new-key-file PATH`: re-wraps the data key of
// every remote API key sealed in the store from the key in secrets_key_file
// to the key in PATH (made, 64 hex digits and mode 600, when PATH does not
// exist), in one transaction. The secrets' ciphertexts are untouched. Then
// point secrets_key_file at PATH and restart the control planes. Reads the
// same configuration as `llmgw control` (--config, env, --store,
// --secrets-key-file), so it finds the same store and key.
import { existsSync } from 'node:fs';
import { loadControlConfig } from '../control/index.js';
import { createKeyFile, readKeyFile, rotateSecrets } from '../control/secrets/index.js';
import { RemoteCredentialRepository } from '../control/store/remote-credentials.js';
import { Store } from '../control/store/index.js';
import { LlmgwError } from '../errors/index.js';

export interface RotateSecretsFlags {
  config?: string;
  store?: string;
  secretsKeyFile?: string;
  newKeyFile: string;
}

export async function runRotateSecrets(flags: RotateSecretsFlags): Promise<void> {
  const config = loadControlConfig({
    ...(flags.config ? { file: flags.config } : {}),
    env: process.env,
    flags: {
      ...(flags.store ? { store: flags.store } : {}),
      ...(flags.secretsKeyFile ? { secrets_key_file: flags.secretsKeyFile } : {}),
    },
  });
  if (config.store.kind === 'none')
    throw new LlmgwError('LLMGW_NO_STORE', 'store is none: no secret is kept to rotate');
  if (!config.secretsKeyFile)
    throw new LlmgwError(
      'LLMGW_CONFIG_INVALID',
      'set secrets_key_file (or --secrets-key-file) to the current key file',
    );
  const current = readKeyFile(config.secretsKeyFile);
  const next = existsSync(flags.newKeyFile) ? readKeyFile(flags.newKeyFile) : createKeyFile(flags.newKeyFile);
  const store = await Store.open({ location: config.store });
  try {
    const { count, from, to } = await rotateSecrets(new RemoteCredentialRepository(store.connection), current, next);
    process.stdout.write(
      `re-wrapped ${count} secret${count === 1 ? '' : 's'} from key ${from} to key ${to}; now set secrets_key_file to ${flags.newKeyFile} and restart the control planes\n`,
    );
  } finally {
    await store.close();
  }
}
