// The filesystems holding the agent's directories (its cache and the
// operator's model directories), each listed once with its free and total
// space and whether it is shared. The edge over mountinfo.ts: it resolves
// links, reads the mount table and asks the kernel for free space.
import { type DiskReport, octalEscapeControls } from '../../protocol/index.js';
import { findMount, isSharedFilesystem, parseMountinfo } from './mountinfo.js';

/** The kernel's answer for one filesystem, as `fs.statfs` gives it (block counts, block size in bytes). */
export interface StatfsResult {
  bsize: number;
  blocks: number;
  bavail: number;
}

export interface DiskProbeDeps {
  readFile: (path: string) => Promise<string>;
  realpath: (path: string) => Promise<string>;
  statfs: (path: string) => Promise<StatfsResult>;
}

/**
 * The real path of `path`, or, when it does not exist yet (a cache directory
 * the agent will create), of its nearest existing ancestor with the rest
 * appended: the directory will land on the ancestor's filesystem. Also
 * returns the existing path, which is what statfs can be asked about.
 */
async function resolveExisting(
  path: string,
  realpath: DiskProbeDeps['realpath'],
): Promise<{ real: string; existing: string }> {
  const missing: string[] = [];
  let current = path;
  for (;;) {
    try {
      const existing = await realpath(current);
      const real =
        missing.length === 0 ? existing : `${existing === '/' ? '' : existing}/${missing.reverse().join('/')}`;
      return { real, existing };
    } catch (err) {
      const parent = current.slice(0, current.lastIndexOf('/')) || '/';
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || parent === current) throw err;
      missing.push(current.slice(current.lastIndexOf('/') + 1));
      current = parent;
    }
  }
}

export interface DiskProbeResult {
  /** Absent when the mount table could not be read (not Linux, or /proc not mounted). */
  disks?: DiskReport[];
  /** Sentences about directories that could not be placed or measured; empty when all were. */
  problems: string[];
}

/**
 * One report per filesystem holding any of `dirs` (absolute paths), in the
 * order the directories were given. A filesystem reached through two bind
 * mounts is one filesystem: its space must not be counted twice.
 */
export async function probeDisks(
  dirs: readonly string[],
  mountinfoPath: string,
  deps: DiskProbeDeps,
): Promise<DiskProbeResult> {
  let mounts;
  try {
    mounts = parseMountinfo(await deps.readFile(mountinfoPath));
  } catch (err) {
    return { problems: [`cannot read the mount table ${mountinfoPath}: ${(err as Error).message}`] };
  }
  const byDevice = new Map<string, { report: DiskReport; statPath: string }>();
  const problems: string[] = [];
  for (const dir of dirs) {
    let resolved;
    try {
      resolved = await resolveExisting(dir, deps.realpath);
    } catch (err) {
      problems.push(`cannot resolve ${dir}: ${(err as Error).message}`);
      continue;
    }
    const mount = findMount(mounts, resolved.real);
    if (mount === null) {
      problems.push(`no filesystem in ${mountinfoPath} holds ${resolved.real}`);
      continue;
    }
    const known = byDevice.get(mount.device);
    if (known) {
      if (!known.report.paths.includes(dir)) known.report.paths.push(dir);
      continue;
    }
    // Escaped again as mountinfo writes them: the control plane refuses a name with a control character in it,
    // and a mount point can hold a newline (the fixtures have one).
    const report: DiskReport = {
      mount_point: octalEscapeControls(mount.mountPoint),
      fs_type: octalEscapeControls(mount.fsType),
      shared: isSharedFilesystem(mount.fsType),
      paths: [dir],
    };
    if (mount.source !== undefined) report.source = octalEscapeControls(mount.source);
    byDevice.set(mount.device, { report, statPath: resolved.existing });
  }
  for (const { report, statPath } of byDevice.values()) {
    try {
      const fs = await deps.statfs(statPath);
      // bavail, not bfree: the blocks reserved for root are not the agent's to fill.
      report.free_bytes = fs.bavail * fs.bsize;
      report.total_bytes = fs.blocks * fs.bsize;
    } catch (err) {
      problems.push(`cannot measure free space on ${report.mount_point}: ${(err as Error).message}`);
    }
  }
  return { disks: [...byDevice.values()].map((d) => d.report), problems };
}
