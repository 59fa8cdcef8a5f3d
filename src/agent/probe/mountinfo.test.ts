import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { findMount, isSharedFilesystem, parseMountinfo, unescapeMountField } from './mountinfo.js';

function text(name: string): string {
  return readFileSync(new URL(`./fixtures/mountinfo/${name}`, import.meta.url), 'utf8');
}

function table(name: string) {
  return parseMountinfo(text(name));
}

describe('parseMountinfo', () => {
  it('reads every line of a container table, the last one without a newline included', () => {
    const mounts = table('gpu-host-lxc-juicefs-overlay.txt');
    expect(mounts.length).toBe(text('gpu-host-lxc-juicefs-overlay.txt').trim().split('\n').length);
    expect(mounts.at(-1)!.fsType, 'the unterminated last line').toBe('overlay');
    expect(mounts.filter((m) => m.fsType === 'fuse.juicefs').map((m) => m.source)).toEqual([
      'JuiceFS:ws-vjigr56z-us-east-training',
      'JuiceFS:ws-vjigr56z-lepton-ai-us-east-dev',
    ]);
  });

  it('unescapes spaces, tabs, newlines and backslashes, and keeps a cifs line whose options hold raw spaces', () => {
    const mounts = table('escaped-spaces-cifs-edge-cases.txt');
    expect(mounts.map((m) => m.mountPoint)).toEqual([
      '/mnt/foo bar',
      '/DATA/foo_bla_bla',
      `/tmp/newline\ntab\tspace backslash\\quote1'quote2"`,
    ]);
    expect(mounts[1]).toMatchObject({ fsType: 'cifs', source: '//foo/BLA BLA BLA/' });
  });

  it('skips lines that are not mountinfo lines', () => {
    expect(parseMountinfo('garbage\n\n36 35 98:0 / /x rw - ext4 /dev/a rw\n')).toHaveLength(1);
  });

  it('unescapes only three-digit octal escapes', () => {
    expect(unescapeMountField('a\\040b\\0c')).toBe('a b\\0c');
  });
});

describe('findMount', () => {
  it('finds the nfs4 volume holding a model directory and the emptyDir holding the cache in a pod', () => {
    const mounts = table('own-k8s-pod-nfs4-pvc.txt');
    expect(findMount(mounts, '/models/llama-3-70b')).toMatchObject({ mountPoint: '/models', fsType: 'nfs4' });
    expect(findMount(mounts, '/var/lib/llmgw/cache')).toMatchObject({
      mountPoint: '/var/lib/llmgw/cache',
      fsType: 'xfs',
    });
    expect(findMount(mounts, '/opt/llmgw')).toMatchObject({ mountPoint: '/', fsType: 'overlay' });
  });

  it('matches whole path components: /models2 is not on /models', () => {
    const mounts = table('own-k8s-pod-nfs4-pvc.txt');
    expect(findMount(mounts, '/models2/x')!.mountPoint).toBe('/');
  });

  it('takes the mount on top when two share a mount point (nfs over its autofs trigger)', () => {
    const mounts = table('own-workstation-cifs-autofs.txt');
    expect(findMount(mounts, '/srv/shared/models')).toMatchObject({
      fsType: 'nfs',
      source: 'fileserver.lab:/srv/shared',
    });
    expect(findMount(mounts, '/home/ana/Team Models/llama')).toMatchObject({
      fsType: 'cifs',
      source: '//nas.lab/Team Models',
    });
  });

  it('is null for a relative path', () => {
    expect(findMount(table('own-k8s-pod-nfs4-pvc.txt'), 'models')).toBeNull();
  });
});

describe('isSharedFilesystem', () => {
  it('marks network and cluster filesystems shared and local ones (local FUSE included) not', () => {
    const mounts = [
      ...table('own-hpc-parallel-filesystems.txt'),
      ...table('own-workstation-cifs-autofs.txt'),
      ...table('gpu-host-lxc-juicefs-overlay.txt'),
      ...table('own-k8s-pod-nfs4-pvc.txt'),
    ];
    const shared = new Set(mounts.filter((m) => isSharedFilesystem(m.fsType)).map((m) => m.fsType));
    expect([...shared].sort()).toEqual(
      [
        '9p',
        'beegfs',
        'ceph',
        'cifs',
        'fuse.gcsfuse',
        'fuse.glusterfs',
        'fuse.juicefs',
        'fuse.rclone',
        'fuse.s3fs',
        'fuse.sshfs',
        'gpfs',
        'lustre',
        'nfs',
        'nfs4',
        'smb3',
      ].sort(),
    );
    for (const local of [
      'ext4',
      'xfs',
      'overlay',
      'tmpfs',
      'fuse.lxcfs',
      'fuse.gvfsd-fuse',
      'fuse.squashfuse',
      'autofs',
    ]) {
      expect(isSharedFilesystem(local), local).toBe(false);
    }
  });
});
