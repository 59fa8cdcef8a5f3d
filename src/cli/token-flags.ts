// Tokens given on a command line: `ps` and /proc/PID/cmdline show every
// process's arguments to every user of the machine, so a token passed as
// --join-token or --admin-token is anyone's who logs in. They still work (a
// quick try by hand), with a warning that names what to use instead: a file
// (--*-token-file) or the environment (LLMGW_*), which only the token's owner
// and root can read.
import { LlmgwError } from '../errors/index.js';
import { readSecretFile } from '../validation/flags.js';

export interface TokenFlag {
  /** The flag a token was given as, e.g. --join-token. */
  readonly flag: string;
  /** The flag that names a file holding it, e.g. --join-token-file. */
  readonly fileFlag: string;
  /** The variable that holds it, e.g. LLMGW_JOIN_TOKEN. */
  readonly env: string;
}

export const JOIN_TOKEN_FLAG: TokenFlag = {
  flag: '--join-token',
  fileFlag: '--join-token-file',
  env: 'LLMGW_JOIN_TOKEN',
};
export const ADMIN_TOKEN_FLAG: TokenFlag = {
  flag: '--admin-token',
  fileFlag: '--admin-token-file',
  env: 'LLMGW_ADMIN_TOKEN',
};

/** The one line `command` prints on stderr when a token came as `t.flag`. */
export function tokenFlagWarning(command: string, t: TokenFlag): string {
  return `${command}: warning: ${t.flag} puts the token on the command line, where every user of this machine can read it (ps); use ${t.fileFlag} FILE (owner-only) or ${t.env} instead`;
}

/** A token file's text, trimmed; LLMGW_CONFIG_INVALID naming the flag when it cannot be read or is empty. */
export function readTokenFile(fileFlag: string, path: string): string {
  const read = readSecretFile(path);
  if ('problem' in read) throw new LlmgwError('LLMGW_CONFIG_INVALID', `${fileFlag} ${path} ${read.problem}`);
  return read.text;
}
