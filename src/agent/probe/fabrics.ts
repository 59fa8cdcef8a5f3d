// The fabrics this node is on: those the operator configured with
// `--fabric name=address` (what placement matches multi-node replicas on,
// and the address peers reach this node at), and the InfiniBand/RoCE ports
// the kernel lists under /sys/class/infiniband with their link state, so an
// operator sees a port that is down before a multi-node replica fails on it.
import type { Dirent } from 'node:fs';
import { join } from 'node:path';
import type { FabricReport } from '../../protocol/index.js';

/**
 * Parses one `--fabric` value: "ib0=10.1.0.5" or "ib0" (on the fabric, no
 * address given). Returns a sentence naming the problem instead of throwing,
 * so the caller can gather every bad flag at once.
 */
export function parseFabricFlag(raw: string): FabricReport | string {
  const text = raw.trim();
  const eq = text.indexOf('=');
  const name = (eq === -1 ? text : text.slice(0, eq)).trim();
  const address = eq === -1 ? undefined : text.slice(eq + 1).trim();
  if (!/^[A-Za-z0-9][A-Za-z0-9_.:-]*$/.test(name)) {
    return `--fabric ${JSON.stringify(raw)}: the fabric name must be letters, digits, "_", ".", ":" or "-"; write --fabric ib0=10.1.0.5`;
  }
  if (address !== undefined && (address === '' || /\s/.test(address))) {
    return `--fabric ${JSON.stringify(raw)}: the address after "=" is empty or has spaces; write --fabric ${name}=10.1.0.5, or --fabric ${name} for no address`;
  }
  return address === undefined ? { name, kind: 'configured' } : { name, address, kind: 'configured' };
}

export interface InfinibandDeps {
  readdir: (path: string) => Promise<Dirent[]>;
  readFile: (path: string) => Promise<string>;
}

/** "4: ACTIVE" -> "ACTIVE": the kernel prefixes the state with its number. */
function stateName(raw: string): string {
  return raw.trim().replace(/^\d+:\s*/, '');
}

async function readTrimmed(path: string, readFile: InfinibandDeps['readFile']): Promise<string | undefined> {
  try {
    const value = (await readFile(path)).trim();
    return value === '' ? undefined : value;
  } catch {
    return undefined;
  }
}

/** Reads a directory's entry names (following links: sysfs devices are links), [] when it cannot. */
async function names(path: string, readdir: InfinibandDeps['readdir']): Promise<string[]> {
  try {
    return (await readdir(path)).map((d) => d.name).sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));
  } catch {
    return [];
  }
}

/**
 * One report per port under `root` (normally /sys/class/infiniband), named
 * "device/port" ("mlx5_0/1"). `kind` is 'infiniband', or 'roce' for a port
 * whose link layer is Ethernet. [] when there is no such directory: a node
 * without RDMA hardware.
 */
export async function probeInfiniband(root: string, deps: InfinibandDeps): Promise<FabricReport[]> {
  const reports: FabricReport[] = [];
  for (const device of await names(root, deps.readdir)) {
    for (const port of await names(join(root, device, 'ports'), deps.readdir)) {
      const dir = join(root, device, 'ports', port);
      const [state, rate, linkLayer] = await Promise.all(
        ['state', 'rate', 'link_layer'].map((file) => readTrimmed(join(dir, file), deps.readFile)),
      );
      const report: FabricReport = {
        name: `${device}/${port}`,
        kind: linkLayer?.toLowerCase() === 'ethernet' ? 'roce' : 'infiniband',
      };
      if (state !== undefined) report.state = stateName(state);
      if (rate !== undefined) report.rate = rate;
      reports.push(report);
    }
  }
  return reports;
}
