// Which filesystem holds a directory, from /proc/self/mountinfo, and whether
// that filesystem is shared with other machines. Shared space is not this
// node's to spend: placement never counts it as free disk for weights. Pure
// over the file's text, so it is tested on captured mount tables.

export interface MountEntry {
  mountId: number;
  /** "major:minor" of the filesystem: two mounts with the same one are the same filesystem (a bind mount). */
  device: string;
  /** The directory inside the filesystem that is mounted here ("/" for the whole filesystem). */
  root: string;
  mountPoint: string;
  fsType: string;
  /** Device, "server:/export", "JuiceFS:name", or absent when the kernel shows none. */
  source?: string;
}

/** `\040` (space), `\011` (tab), `\012` (newline), `\134` (backslash): how the kernel escapes mountinfo fields. */
export function unescapeMountField(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}

/**
 * Parses mountinfo, one entry per line in the file's order (later lines are
 * mounted on top of earlier ones). Lines that are not of the form are
 * skipped: a table with one odd line still says where everything else is.
 */
export function parseMountinfo(text: string): MountEntry[] {
  const entries: MountEntry[] = [];
  for (const line of text.split('\n')) {
    // The super options after the source may hold raw spaces (cifs "unc=\\srv\a b"), so split the two halves apart first.
    const separator = line.indexOf(' - ');
    if (separator === -1) continue;
    const head = line.slice(0, separator).split(' ');
    const tail = line.slice(separator + 3).split(' ');
    const [id, , device, root, mountPoint] = head;
    const [fsType, source] = tail;
    if (head.length < 6 || !fsType || !mountPoint || !root || !device || !/^\d+$/.test(id ?? '')) continue;
    const entry: MountEntry = {
      mountId: Number(id),
      device,
      root: unescapeMountField(root),
      mountPoint: unescapeMountField(mountPoint),
      fsType: unescapeMountField(fsType),
    };
    if (source !== undefined && source !== '' && source !== 'none') entry.source = unescapeMountField(source);
    entries.push(entry);
  }
  return entries;
}

/** True when `mountPoint` is `path` or one of its ancestors (by whole path components). */
function contains(mountPoint: string, path: string): boolean {
  if (mountPoint === '/') return path.startsWith('/');
  return path === mountPoint || path.startsWith(`${mountPoint}/`);
}

/**
 * The mount that holds `realPath` (already resolved: no links, no "..").
 * The longest mount point wins; among equal ones the last in the table,
 * which is the one on top. Null when nothing holds it (not an absolute path).
 */
export function findMount(entries: readonly MountEntry[], realPath: string): MountEntry | null {
  let best: MountEntry | null = null;
  for (const entry of entries) {
    if (!contains(entry.mountPoint, realPath)) continue;
    if (best === null || entry.mountPoint.length >= best.mountPoint.length) best = entry;
  }
  return best;
}

/** Network and cluster filesystems: the same space is seen, and spent, by other machines. */
const SHARED_FS_TYPES: ReadonlySet<string> = new Set([
  'nfs',
  'nfs4',
  'cifs',
  'smb3',
  'smbfs',
  'lustre',
  'gpfs',
  'ceph',
  'cephfs',
  'glusterfs',
  'beegfs',
  '9p',
  'virtiofs',
  'afs',
  'panfs',
  'wekafs',
  'orangefs',
  'pvfs2',
  'ocfs2',
  'gfs2',
  'davfs',
]);

/**
 * FUSE filesystems show as "fuse.<program>"; these programs mount network or
 * object storage. Local FUSE filesystems (lxcfs, gvfsd-fuse, squashfuse,
 * ntfs-3g as "fuseblk") are not listed and count as local.
 */
const SHARED_FUSE_PROGRAMS: ReadonlySet<string> = new Set([
  'glusterfs',
  'juicefs',
  'sshfs',
  's3fs',
  'gcsfuse',
  'rclone',
  'ceph-fuse',
  'cephfs',
  'mountpoint-s3',
  'goofys',
  'geesefs',
  'blobfuse',
  'blobfuse2',
  'alluxio-fuse',
  'seaweedfs',
  'weed',
  'mfs',
  'moosefs',
  'lizardfs',
  'cvmfs2',
  'beegfs',
  'lustre',
  'davfs2',
  'oss2',
  'ossfs',
  'cosfs',
]);

export function isSharedFilesystem(fsType: string): boolean {
  const type = fsType.toLowerCase();
  if (SHARED_FS_TYPES.has(type)) return true;
  return type.startsWith('fuse.') && SHARED_FUSE_PROGRAMS.has(type.slice('fuse.'.length));
}
