// The weight cache's disk filling up during a fetch, end to end: an agent
// whose cache directory is a small tmpfs, a loopback HTTP source bigger than
// it. A full disk must fail the replica with words an operator can act on,
// leave nothing partial behind (a half-written file would eat the space the
// next fetch needs, and could be mistaken for weights), and heal by itself
// once space is back. Needs root to mount a tmpfs: skipped with a message
// where that is refused, and a failure under CI, where it must run.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { killEnginesOf, stopAll } from '../support/processes.js';
import { waitFor } from '../support/wait.js';
import { Fleet } from './fleet-support.js';

const MiB = 1024 * 1024;
const mounted: string[] = [];
let server: Server | undefined;
let fleet: Fleet | undefined;

/** Whether this machine lets the test mount a tmpfs; the reason when not. */
const tmpfsProbe = ((): { ok: boolean; reason: string } => {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-faults-probe-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', dir], { stdio: 'ignore' });
    execFileSync('umount', [dir], { stdio: 'ignore' });
    return { ok: true, reason: '' };
  } catch (err) {
    return { ok: false, reason: `cannot mount a tmpfs here (${(err as Error).message.split('\n')[0]})` };
  }
})();
if (!tmpfsProbe.ok) console.warn(`disk-faults: the full-disk test is skipped: ${tmpfsProbe.reason}`);

afterAll(async () => {
  await stopAll();
  if (fleet) killEnginesOf(fleet.stateDirs);
  server?.close();
  for (const dir of mounted) {
    try {
      execFileSync('umount', [dir], { stdio: 'ignore' });
    } catch {
      // Already unmounted.
    }
  }
});

/** Every regular file under `dir`, with its size. */
function filesUnder(dir: string): { path: string; bytes: number }[] {
  const out: { path: string; bytes: number }[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    const st = statSync(path);
    if (st.isDirectory()) out.push(...filesUnder(path));
    else out.push({ path, bytes: st.size });
  }
  return out;
}

describe('disk faults', () => {
  it('must be able to mount a tmpfs under CI', () => {
    // Skipping hides the case; under CI that is a failure, not a warning.
    if (process.env.CI) expect(tmpfsProbe.reason, 'the disk-full case needs to mount a tmpfs (root)').toBe('');
  });

  it.skipIf(!tmpfsProbe.ok)(
    'a fetch that fills the cache disk fails the replica with "disk full", leaves nothing partial, and succeeds once space returns',
    async () => {
      const weights = Buffer.alloc(3 * MiB, 7);
      server = createServer((req, res) => {
        if (req.url !== '/weights.gguf') {
          res.writeHead(404).end();
          return;
        }
        res.writeHead(200, { 'content-length': String(weights.length), 'accept-ranges': 'bytes' });
        res.end(weights);
      });
      await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
      const source = `http://127.0.0.1:${(server.address() as AddressInfo).port}/weights.gguf`;

      fleet = new Fleet(mkdtempSync(join(tmpdir(), 'llmgw-faults-disk-')), 31600);
      const cacheDir = join(fleet.dir, 'cache');
      mkdirSync(cacheDir);
      // 1 MiB for 3 MiB of weights.
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', cacheDir]);
      mounted.push(cacheDir);

      await fleet.startControl(['--reconcile-interval', '300ms', '--allow-http-sources']);
      fleet.startAgent('f1', ['--cache-dir', cacheDir, '--allow-http-sources']);
      await fleet.nodesUp(1);
      await fleet.addModel({ name: 'big', source, scaling: { min: 1 }, profiles: [{ engine: 'sim' }] });

      const failed = await waitFor(
        'the replica failed for a full disk',
        async () => {
          const [r] = await fleet!.replicas('big');
          return r?.state === 'failed' && r.error ? r : undefined;
        },
        60_000,
      );
      expect(failed.error, 'the reason is in words').toMatch(/disk full/);
      expect(
        filesUnder(cacheDir).filter((f) => f.bytes > 0),
        'nothing partial stays in the cache',
      ).toEqual([]);

      // Space returns: the same mount, grown to fit.
      execFileSync('mount', ['-o', 'remount,size=16m', cacheDir]);
      await waitFor(
        'the replica ready once the fetch succeeds',
        async () => {
          const ready = (await fleet!.replicas('big')).filter((r) => r.state === 'ready');
          return ready.length === 1 ? true : undefined;
        },
        180_000,
      );
      const cached = filesUnder(cacheDir).filter((f) => f.bytes === weights.length);
      expect(cached, 'the weights are in the cache, whole').toHaveLength(1);
    },
    300_000,
  );
});
