// A Postgres cluster of a test's own, for tests that stop and start the
// server: the shared one (LLMGW_TEST_POSTGRES) serves every other test and
// must never go down. Made as .ci/run makes the shared one: initdb and pg_ctl
// run as the `postgres` user (tests run as root, and Postgres refuses root),
// on a free port, with its socket in /tmp.
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './processes.js';

export interface PrivatePostgres {
  /** postgres://postgres@127.0.0.1:PORT/postgres */
  url: string;
  port: number;
  start(): void;
  /** A fast shutdown: sessions are ended, as when the server host goes away. */
  stop(): void;
  /** Stops the server and removes its data directory. */
  destroy(): void;
}

function pgBin(): string {
  const candidates = [process.env.LLMGW_TEST_PGBIN, '/usr/lib/postgresql/15/bin'].filter((d): d is string =>
    Boolean(d),
  );
  const found = candidates.find((d) => existsSync(join(d, 'pg_ctl')));
  if (!found)
    throw new Error(
      `no pg_ctl in ${candidates.join(' or ')}; set LLMGW_TEST_PGBIN to the directory holding initdb and pg_ctl`,
    );
  return found;
}

function asPostgres(command: string): void {
  execFileSync('su', ['postgres', '-s', '/bin/sh', '-c', command], {
    stdio: ['ignore', 'ignore', 'pipe'],
    timeout: 60_000,
  });
}

export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const bin = pgBin();
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-private-pg-'));
  chmodSync(dir, 0o777);
  const data = join(dir, 'data');
  const port = await freePort();
  asPostgres(`${bin}/initdb -D ${data} -U postgres --auth=trust -E UTF8 >/dev/null`);
  let running = false;
  const pg: PrivatePostgres = {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    start() {
      asPostgres(
        `${bin}/pg_ctl -D ${data} -o '-p ${port} -k /tmp -c listen_addresses=127.0.0.1 -c fsync=off' -l ${dir}/log -w start >/dev/null`,
      );
      running = true;
    },
    stop() {
      if (!running) return;
      asPostgres(`${bin}/pg_ctl -D ${data} -m fast -w stop >/dev/null`);
      running = false;
    },
    destroy() {
      try {
        pg.stop();
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
  pg.start();
  return pg;
}
