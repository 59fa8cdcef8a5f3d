// `llmgw ctl` against a real control plane with two simulated agents: what it
// prints matches what the admin API serves, -o json is that JSON, changes
// (cordon, drain, models add/rm, collect) land, and the exit codes scripts
// branch on hold: 0 ok, 1 failed, 2 usage, 3 placement impossible. Output to
// a pipe never carries colour codes.
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient, type NodeView } from '../../src/api/index.js';
import { cacheNameOf } from '../../src/protocol/index.js';
import { freePort, killEnginesOf, startControl, startLlmgw, stopAll } from '../support/processes.js';
import { waitFor } from '../support/wait.js';
import { ANSI_RE, type CtlResult, runCtlCli } from './ctl-support.js';

const JOIN = 'e2e-ctl-join-token-0123456789abcdef';
const ADMIN = 'e2e-ctl-admin-token-0123456789abcdef';

let dir: string;
let adminUrl: string;
let api: AdminClient;
const stateDirs: string[] = [];
let env: Record<string, string>;
let orphanPath: string;

async function ctl(...args: string[]): Promise<CtlResult> {
  const r = await runCtlCli(args, { env });
  expect(r.stdout, `llmgw ctl ${args.join(' ')} wrote colour codes to a pipe`).not.toMatch(ANSI_RE);
  expect(r.stderr, `llmgw ctl ${args.join(' ')} wrote colour codes to a pipe`).not.toMatch(ANSI_RE);
  return r;
}

function withoutClock(nodes: NodeView[]): Omit<NodeView, 'last_seen_ago'>[] {
  return nodes.map(({ last_seen_ago: _ago, ...rest }) => rest);
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'llmgw-e2e-ctl-'));
  const control = await startControl([
    '--store',
    `sqlite:${join(dir, 'db')}`,
    '--join-token',
    JOIN,
    '--admin-token',
    ADMIN,
    '--reconcile-interval',
    '500ms',
    '--log-level',
    'warn',
  ]);
  adminUrl = control.urls.admin;
  api = new AdminClient({ baseUrl: adminUrl, token: ADMIN, actor: 'e2e' });
  env = { LLMGW_ADMIN_URL: adminUrl, LLMGW_ADMIN_TOKEN: ADMIN };
  // One cache entry that no model wants, on n1: an orphan for `weights` to list and collect.
  const cacheDir = join(dir, 'n1-cache');
  orphanPath = join(cacheDir, cacheNameOf('hf://org/forgotten')!);
  mkdirSync(join(orphanPath, 'files'), { recursive: true });
  writeFileSync(join(orphanPath, 'files', 'model.gguf'), Buffer.alloc(4096, 1));
  writeFileSync(join(orphanPath, 'manifest.json'), JSON.stringify({ source: 'hf://org/forgotten', files: [] }));
  // Engine ports apart from the other e2e files (fleet 23000+, fetch-progress 24500), which may run at the same time.
  let ports = 26100;
  for (const id of ['n1', 'n2']) {
    const stateDir = join(dir, id);
    stateDirs.push(stateDir);
    startLlmgw([
      'agent',
      '--control',
      control.urls.agent,
      '--join-token',
      JOIN,
      '--node-id',
      id,
      '--state-dir',
      stateDir,
      ...(id === 'n1' ? ['--cache-dir', cacheDir] : []),
      '--simulate',
      'gpus=8xh100-80gb,ram=2048g,disk=/data:3.5t:local',
      '--heartbeat-interval',
      '300ms',
      '--port-range',
      `${ports}-${ports + 49}`,
      '--log-level',
      'warn',
    ]);
    ports += 50;
  }
  await waitFor('both agents to join', async () =>
    (await api.nodes()).filter((n) => n.liveness === 'up' && n.gpu_total === 8).length === 2 ? true : undefined,
  );
});

afterAll(async () => {
  await stopAll();
  killEnginesOf(stateDirs);
});

describe('llmgw ctl against a real fleet', () => {
  it('prints the summary', async () => {
    const r = await ctl('summary');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^nodes\s+2: ready 2; up 2$/m);
    expect(r.stdout).toMatch(/^store\s+yes$/m);
  });

  it('shows each node with the numbers the API serves, and -o json is the API JSON', async () => {
    const r = await ctl('nodes');
    expect(r.code, r.stderr).toBe(0);
    const nodes = await api.nodes();
    for (const n of nodes) {
      const row = r.stdout.split('\n').find((l) => l.includes(` ${n.id} `));
      expect(row, `no row for ${n.id} in:\n${r.stdout}`).toBeDefined();
      expect(row).toContain(`${n.gpu_free}/${n.gpu_total}`);
      expect(row).toContain(`${n.memory_gb} GiB`);
      expect(row).toContain(`${n.disk_free_gb}/${n.disk_total_gb} GiB`);
      expect(row).toContain('h100-80gb');
    }
    const json = await ctl('nodes', '-o', 'json');
    expect(json.code).toBe(0);
    expect(withoutClock(JSON.parse(json.stdout) as NodeView[])).toEqual(withoutClock(await api.nodes()));
    const summary = await ctl('-o', 'json', 'summary');
    expect(JSON.parse(summary.stdout)).toEqual(await api.summary());
  });

  it('cordons and uncordons a node, and nodes shows it', async () => {
    const c = await ctl('cordon', 'n2');
    expect(c.code, c.stderr).toBe(0);
    expect(c.stdout).toContain('node n2 is cordoned');
    const listed = await ctl('nodes');
    expect(listed.stdout.split('\n').find((l) => l.includes(' n2 '))).toContain('cordoned');
    const onlyCordoned = await ctl('nodes', '--state', 'cordoned');
    expect(onlyCordoned.code, onlyCordoned.stderr).toBe(0);
    expect(onlyCordoned.stdout, 'the control plane filters: n1 is ready').not.toContain(' n1 ');
    expect(onlyCordoned.stdout).toContain(' n2 ');
    expect(onlyCordoned.stdout).toContain('showing 1 of 1 node');
    const paged = await ctl('nodes', '--limit', '1');
    expect(paged.stdout).toContain('showing 1 of 2 nodes; next page: llmgw ctl nodes --after n1 --limit 1');
    const u = await ctl('uncordon', 'n2');
    expect(u.code, u.stderr).toBe(0);
    expect((await api.nodes()).find((n) => n.id === 'n2')?.state).toBe('ready');
  });

  it('refuses a model no node could run with exit 3, adds it with --force, and explain exits 3', async () => {
    const file = join(dir, 'huge.yaml');
    writeFileSync(
      file,
      'name: huge\nsource: hf://org/huge\nprofiles:\n  - engine: vllm\n    gpus: 64\n    gpu_classes: [b200]\n',
    );
    const refused = await ctl('models', 'add', file);
    expect(refused.code, refused.stderr).toBe(3);
    expect(refused.stderr).toContain('no known node could ever run this model');
    const forced = await ctl('models', 'add', file, '--force');
    expect(forced.code, forced.stderr).toBe(0);
    expect(forced.stdout).toContain('added huge');
    const why = await waitFor('a placement attempt for huge', async () => {
      const r = await ctl('explain', 'huge');
      return r.code === 3 ? r : undefined;
    });
    expect(why.stdout).toContain('not placed');
    expect(why.stdout).toContain('b200');
    const json = await ctl('explain', 'huge', '-o', 'json');
    expect(json.code).toBe(3);
    expect(JSON.parse(json.stdout)).toMatchObject({ model: 'huge', placed: false });
    const rm = await ctl('models', 'rm', 'huge', '--yes');
    expect(rm.code, rm.stderr).toBe(0);
  });

  it('adds several models from one file, lists them as the API does, and removes one by its exact name', async () => {
    const file = join(dir, 'models.json');
    writeFileSync(
      file,
      JSON.stringify({
        models: [
          {
            name: 'alpha',
            aliases: ['a'],
            source: 'hf://org/alpha',
            scaling: { min: 0 },
            profiles: [{ engine: 'sim' }],
          },
          { name: 'beta', source: 'hf://org/beta', scaling: { min: 0 }, profiles: [{ engine: 'sim' }] },
        ],
      }),
    );
    const dry = await ctl('models', 'add', file, '--dry-run');
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toContain('nothing was added');
    expect(dry.stdout).toContain('scaling.min is 0: no replica starts until a request arrives');
    expect((await api.models()).map((m) => m.name)).not.toContain('alpha');

    const add = await ctl('models', 'add', file);
    expect(add.code, add.stderr).toBe(0);
    expect(add.stdout).toContain('added alpha');
    expect(add.stdout).toContain('added beta');
    const listed = await ctl('models');
    expect(listed.stdout).toMatch(/alpha/);
    expect(JSON.parse((await ctl('models', '-o', 'json')).stdout)).toEqual(await api.models());

    const byAlias = await ctl('models', 'rm', 'a', '--yes');
    expect(byAlias.code, 'an alias is not an exact name').toBe(1);
    expect(byAlias.stderr).toContain('alias of alpha');
    const rm = await ctl('models', 'rm', 'alpha', '--yes');
    expect(rm.code, rm.stderr).toBe(0);
    expect((await api.models()).map((m) => m.name)).toEqual(['beta']);
    await api.removeModel('beta');
  });

  it('plans a file with --dry-run: where each replica would run, and exit 3 when one cannot be placed', async () => {
    const file = join(dir, 'plan.json');
    writeFileSync(
      file,
      JSON.stringify([
        {
          name: 'gamma',
          source: 'hf://org/gamma',
          scaling: { min: 2 },
          profiles: [{ engine: 'sim', gpus: 4, gpu_memory_gb: 40 }],
        },
        { name: 'enormous', source: 'hf://org/enormous', profiles: [{ engine: 'sim', gpus: 16, gpu_memory_gb: 80 }] },
      ]),
    );
    const dry = await ctl('models', 'add', file, '--dry-run');
    expect(dry.code, dry.stderr).toBe(3);
    expect(dry.stdout).toContain('gamma: 2/2 replica(s) placed');
    expect(dry.stdout).toMatch(/#1 .* n[12] .* \d,\d,\d,\d/);
    expect(dry.stdout).toContain('enormous: 0/1 replica(s) placed');
    expect(dry.stderr).toContain('could not be fully placed: enormous');
    const json = JSON.parse((await ctl('models', 'add', file, '--dry-run', '-o', 'json')).stdout) as {
      models: { name: string; placed: { shards: { gpus: number[] }[] }[] }[];
    };
    expect(json.models.map((m) => [m.name, m.placed.length])).toEqual([
      ['gamma', 2],
      ['enormous', 0],
    ]);
    expect(json.models[0]!.placed.every((r) => r.shards[0]!.gpus.length === 4)).toBe(true);
    expect(
      (await api.models()).map((m) => m.name),
      'a dry run adds nothing',
    ).not.toContain('gamma');
  });

  it('lists orphaned weights with sizes and a total, and collects them', async () => {
    await waitFor('the orphan on n1 to be reported', async () =>
      (await api.orphans()).nodes.length ? true : undefined,
    );
    const r = await ctl('weights');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(orphanPath);
    expect(r.stdout).toMatch(/total: \S+ \S+ in 1 orphan\(s\) on 1 node\(s\)/);
    expect(JSON.parse((await ctl('weights', '-o', 'json')).stdout)).toEqual(await api.orphans());

    const c = await ctl('weights', '--collect', '--node', 'n1');
    expect(c.code, c.stderr).toBe(0);
    expect(c.stdout).toMatch(/^node n1: asked to remove 1 \(.+\), removed 1, refused 0$/m);
  });

  it('follows a drain until no replica runs on the node', async () => {
    await api.addModel({ name: 'chat', source: weightsSource(), scaling: { min: 1 }, profiles: [{ engine: 'sim' }] });
    const placed = await waitFor(
      'chat to be ready',
      async () => (await api.replicas({ model: 'chat' })).find((r) => r.state === 'ready'),
      30_000,
    );
    const on = placed.shards[0]!.node;
    const r = await runCtlCli(['drain', on, '--wait', '--timeout', '40s'], { env, timeoutMs: 50_000 });
    expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(0);
    expect(r.stdout).toContain(`waiting for 1 replica(s) on ${on}`);
    expect(r.stdout).toContain(`node ${on} is drained`);
    expect(r.stdout).not.toMatch(ANSI_RE);
    await api.uncordon(on);

    // The engine's own log, fetched from the node that runs the replica now.
    const now = await waitFor(
      'chat to be ready again',
      async () => (await api.replicas({ model: 'chat' })).find((x) => x.state === 'ready'),
      30_000,
    );
    const logs = await ctl('logs', now.id, '-n', '20');
    expect(logs.code, logs.stderr).toBe(0);
    expect(logs.stderr).toContain(`replica ${now.id}, shard 0`);
    expect(logs.stdout).toMatch(/listening on http:\/\/127\.0\.0\.1:\d+/);
    const missing = await ctl('logs', 'rep-nope');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('no replica has the id "rep-nope"');
    expect((await ctl('logs', now.id, '--shard', '3')).stderr).toContain('has no shard of rank 3');
  }, 90_000);

  it('creates, lists and revokes API keys, and shows usage per key and model', async () => {
    const created = await ctl('keys', 'create', 'ci-bot', '--models', 'chat', '--rpm', '60', '--expires', '30d');
    expect(created.code, created.stderr).toBe(0);
    const secret = /^secret: (\S+)$/m.exec(created.stdout)?.[1];
    expect(secret).toBeDefined();
    const id = /^created key (\S+) /m.exec(created.stdout)![1]!;
    const ls = await ctl('keys', 'ls');
    expect(ls.code, ls.stderr).toBe(0);
    expect(ls.stdout).toContain('ci-bot');
    expect(ls.stdout).not.toContain(secret!);
    const lsJson = JSON.parse((await ctl('keys', 'ls', '-o', 'json')).stdout) as {
      keys: { id: string; allowed_models: string[]; requests_per_minute: number; state: string }[];
    };
    expect(lsJson.keys.find((k) => k.id === id)).toMatchObject({
      allowed_models: ['chat'],
      requests_per_minute: 60,
      state: 'active',
    });
    expect((await ctl('keys', 'create', 'bad', '--rpm', 'lots')).code, 'a bad flag value is a usage error').toBe(2);
    expect((await ctl('keys', 'rm', 'ci-bot', '--yes')).stderr).toContain(`matches ${id}`);
    const rm = await ctl('keys', 'rm', id, '--yes');
    expect(rm.code, rm.stderr).toBe(0);
    expect(
      JSON.parse((await ctl('keys', 'ls', '-o', 'json')).stdout).keys.find((k: { id: string }) => k.id === id).state,
    ).toBe('revoked');

    const usage = await ctl('usage');
    expect(usage.code, usage.stderr).toBe(0);
    expect(JSON.parse((await ctl('usage', '-o', 'json')).stdout)).toEqual(await api.usage());
  });

  it('says what to do when the admin API cannot be reached, and exits 1', async () => {
    const port = await freePort();
    const r = await runCtlCli(['nodes'], { env: { LLMGW_ADMIN_URL: `http://127.0.0.1:${port}` } });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`cannot reach the admin API at http://127.0.0.1:${port}`);
    expect(r.stderr).toContain('is `llmgw control` running? set LLMGW_ADMIN_URL');
  });

  it('exits 1 with a hint when the token is missing', async () => {
    const r = await runCtlCli(['nodes'], { env: { LLMGW_ADMIN_URL: adminUrl } });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('LLMGW_ADMIN_TOKEN');
  });

  it('exits 2 on an unknown command or option', async () => {
    expect((await ctl('frobnicate')).code).toBe(2);
    expect((await ctl('nodes', '--bogus')).code).toBe(2);
    expect((await ctl('node')).code, 'a missing argument is a usage error').toBe(2);
  });

  it('finds a local `llmgw up` in its data directory without being told', async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'llmgw-e2e-ctl-up-'));
    mkdirSync(join(cwd, '.llmgw'));
    writeFileSync(
      join(cwd, '.llmgw', 'control.json'),
      JSON.stringify({ admin_url: adminUrl, client_url: 'http://127.0.0.1:1', agent_url: 'http://127.0.0.1:2' }),
    );
    writeFileSync(join(cwd, '.llmgw', 'admin-token'), `${ADMIN}\n`);
    const r = await runCtlCli(['summary'], { cwd });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^nodes\s+2:/m);
  });
});

function weightsSource(): string {
  const w = join(dir, 'weights');
  mkdirSync(w, { recursive: true });
  return `file://${w}`;
}
