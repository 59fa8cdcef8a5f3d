// Who this agent is to its control plane: a node id stable across restarts,
// and the credential it was given when it joined. Kept in the agent's state
// directory, readable by its owner only, written atomically so a crash never
// leaves half a credential behind.
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { hostname as osHostname } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';

const IdentitySchema = z.object({
  node_id: z.string(),
  credential: z.string(),
  mgmt_token: z.string(),
  /** The control plane URL that issued it; informational (any instance of one fleet accepts it). */
  control: z.string().optional(),
});
export type Identity = z.infer<typeof IdentitySchema>;

/**
 * The default node id: the hostname, made safe, plus eight hex digits of a
 * hash of /etc/machine-id and the hostname. Stable across restarts; two
 * cloned machines with the same hostname still differ by machine id.
 */
export function defaultNodeId(
  readMachineId: () => string | null = readMachineIdFile,
  host: string = osHostname(),
): string {
  const safe =
    host
      .toLowerCase()
      .replace(/[^a-z0-9.-]+/g, '-')
      .replace(/^[^a-z0-9]+/, '')
      .slice(0, 48) || 'node';
  const machineId = readMachineId() ?? '';
  return `${safe}-${createHash('sha256').update(`${machineId}\0${host}`).digest('hex').slice(0, 8)}`;
}

function readMachineIdFile(): string | null {
  for (const path of ['/etc/machine-id', '/var/lib/dbus/machine-id']) {
    try {
      const id = readFileSync(path, 'utf8').trim();
      if (id) return id;
    } catch {
      // Containers often have neither; the hostname alone then names the node.
    }
  }
  return null;
}

export function loadIdentity(stateDir: string): Identity | null {
  try {
    const parsed = IdentitySchema.safeParse(JSON.parse(readFileSync(join(stateDir, 'node.json'), 'utf8')));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

export function saveIdentity(stateDir: string, identity: Identity): void {
  mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  const path = join(stateDir, 'node.json');
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSync(tmp, `${JSON.stringify(identity, null, 2)}\n`, { mode: 0o600 });
  renameSync(tmp, path);
}
