// Attacks by a local user, replayed against real processes on loopback: a
// second account on the same host reads every process's command line
// (`ps -eo args`, /proc/PID/cmdline are world-readable) and every port on
// loopback. Before issue 33 the sim, builtin and SGLang engines got the
// replica's secret as --api-key=…, so anyone on the host could skip API keys,
// limits and accounting by posting to the engine's port with it; the README's
// second machine passed the join token as --join-token; and `llmgw control`
// with no admin token answered every admin call on loopback to anyone.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ReplicaView } from '../../src/api/index.js';
import { engineRecordOf } from '../support/fleet.js';
import { killEnginesOf, startControl, startLlmgw, stopAll, type RunningProcess } from '../support/processes.js';
import { waitFor } from '../support/wait.js';

const stateDirs: string[] = [];

afterAll(async () => {
  await stopAll();
  killEnginesOf(stateDirs);
});

/** Every process whose parent chain reaches one of `roots`, the roots included. */
function processTree(roots: readonly number[]): number[] {
  const parentOf = new Map<number, number>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      // The command name (field 2) is in parentheses and may hold spaces; the ppid follows the last ')'.
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      parentOf.set(Number(name), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // Gone while we looked.
    }
  }
  const tree = new Set(roots);
  for (let grew = true; grew;) {
    grew = false;
    for (const [pid, ppid] of parentOf) {
      if (!tree.has(pid) && tree.has(ppid)) {
        tree.add(pid);
        grew = true;
      }
    }
  }
  return [...tree];
}

/** What any user of the host reads as `pid`'s command line. */
function cmdlineOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return '';
  }
}

function environOf(pid: number): Map<string, string> {
  const out = new Map<string, string>();
  for (const entry of readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0')) {
    const eq = entry.indexOf('=');
    if (eq > 0) out.set(entry.slice(0, eq), entry.slice(eq + 1));
  }
  return out;
}

const read = (path: string) => readFileSync(path, 'utf8').trim();
const chat = (model: string) => JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 });

describe('no token or secret on any command line of `llmgw up` and a second machine started as the README says', () => {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-sec-cmdline-'));
  const data = join(dir, 'data');
  const secondState = join(dir, 'second');
  let up: RunningProcess;
  let second: RunningProcess;
  let adminUrl = '';
  let clientUrl = '';
  let replicas: ReplicaView[] = [];
  const admin = () => ({
    authorization: `Bearer ${read(join(data, 'admin-token'))}`,
    'content-type': 'application/json',
    'x-llmgw-actor': 'sec-cmdline',
  });

  beforeAll(async () => {
    stateDirs.push(join(data, 'agent'), secondState);
    up = startLlmgw([
      'up',
      '--data-dir',
      data,
      '--client-addr',
      '127.0.0.1:0',
      '--admin-addr',
      '127.0.0.1:0',
      '--agent-addr',
      '127.0.0.1:0',
      '--log-level',
      'info',
    ]);
    const ready = await up.waitForLog((e) => e.msg === 'llmgw up ready', 120_000);
    adminUrl = ready.admin as string;
    clientUrl = ready.client as string;
    const agentUrl = (JSON.parse(readFileSync(join(data, 'control.json'), 'utf8')) as { agent_url: string }).agent_url;

    // The README's second machine: the join token copied into a file of its own, named by --join-token-file.
    const tokenFile = join(dir, 'join-token');
    writeFileSync(tokenFile, readFileSync(join(data, 'join-token')), { mode: 0o600 });
    second = startLlmgw([
      'agent',
      '--control',
      agentUrl,
      '--join-token-file',
      tokenFile,
      '--node-id',
      'second',
      '--labels',
      'role=second',
      '--state-dir',
      secondState,
      '--simulate',
      'gpus=0,ram=16g',
      '--heartbeat-interval',
      '300ms',
      '--port-range',
      '27400-27449',
    ]);
    await waitFor(
      () => `the second machine joined; its stderr:\n${second.stderr().slice(-2000)}`,
      async () =>
        ((await (await fetch(`${adminUrl}/api/v1/nodes`, { headers: admin() })).json()) as { id: string }[]).some(
          (n) => n.id === 'second',
        ),
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    const weights = join(dir, 'weights');
    mkdirSync(weights);
    const added = await fetch(`${adminUrl}/api/v1/models`, {
      method: 'POST',
      headers: admin(),
      body: JSON.stringify({
        name: 'sim-chat',
        source: `file://${weights}`,
        scaling: { min: 1 },
        profiles: [{ engine: 'sim', pool: 'role=second', args: ['--ttft-ms', '1'] }],
      }),
    });
    expect(added.status, await added.clone().text()).toBe(200);
    replicas = await waitFor(
      () =>
        `a ready replica of demo (builtin, under up) and of sim-chat (sim, on the second machine); second agent: ${second.stderr().slice(-2000)}`,
      async () => {
        const all = (await (await fetch(`${adminUrl}/api/v1/replicas`, { headers: admin() })).json()) as ReplicaView[];
        const ready = all.filter((r) => r.state === 'ready' && r.endpoint);
        return ['demo', 'sim-chat'].every((m) => ready.some((r) => r.model === m)) ? ready : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 250 },
    );
  }, 240_000);

  it('shows no admin token, join token, API key or replica secret in the command line of any process they started', () => {
    const secrets: Record<string, string> = {
      'admin token': read(join(data, 'admin-token')),
      'join token': read(join(data, 'join-token')),
      'API key': read(join(data, 'api-key')),
    };
    const enginePids: number[] = [];
    for (const r of replicas) {
      const record = engineRecordOf(stateDirs, r.id);
      expect(record.launch.apiKey, `${r.model}: the engine was started with the replica's secret`).toMatch(
        /^llmgw-es-/,
      );
      secrets[`${r.model}'s replica secret`] = record.launch.apiKey!;
      enginePids.push(record.pid);
    }
    const tree = processTree([up.child.pid!, second.child.pid!]);
    // The check means something only if the engines are in what was read.
    for (const pid of enginePids)
      expect(tree, `engine pid ${pid} is a child of up or of the second agent`).toContain(pid);
    const leaks: string[] = [];
    for (const pid of tree) {
      const cmdline = cmdlineOf(pid);
      for (const [what, value] of Object.entries(secrets))
        if (cmdline.includes(value)) leaks.push(`${what} in pid ${pid}: ${cmdline.replaceAll(value, '<here>')}`);
    }
    expect(leaks, 'what `ps -eo args` shows every user').toEqual([]);
  });

  it("refuses a direct engine request without the secret; the secret lives in the engine's owner-only environment, and the router sends it", async () => {
    for (const r of replicas) {
      const { pid, launch } = engineRecordOf(stateDirs, r.id);
      const bare = await fetch(`${r.endpoint!}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: chat(r.model),
      });
      expect(bare.status, `${r.model}: no key at the engine port, refused`).toBe(401);
      // /proc/PID/environ is readable by the process's own user and root alone, unlike its command line.
      expect(statSync(`/proc/${pid}/environ`).mode & 0o077, `${r.model}: the environment is its owner's alone`).toBe(0);
      expect(statSync(`/proc/${pid}/cmdline`).mode & 0o004, "while the command line is every user's").toBe(0o004);
      const fromEnv = environOf(pid).get('LLMGW_ENGINE_API_KEY');
      expect(fromEnv, `${r.model}: the engine's key came in LLMGW_ENGINE_API_KEY`).toBe(launch.apiKey);
      const keyed = await fetch(`${r.endpoint!}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${fromEnv!}` },
        body: chat(r.model),
      });
      expect(keyed.status, `${r.model}: the engine serves whoever holds its secret, which is the router`).toBe(200);
      const routed = await fetch(`${clientUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${read(join(data, 'api-key'))}` },
        body: chat(r.model),
      });
      expect(routed.status, `${r.model}: through the router with a client key`).toBe(200);
    }
  });
});

describe('`llmgw control` with no admin token configured', () => {
  const ADMIN_PATH = '/api/v1/models';

  it('makes one (0600, in its data directory, path printed), refuses an admin call without it with 401, and keeps it across a restart', async () => {
    // Attack: any user of the host called the admin API on loopback with no token and ran anything on every node.
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-sec-admin-made-'));
    const tokenFile = join(dir, 'admin-token');
    const first = await startControl(['--store', `sqlite:${join(dir, 'db')}`], { makesAdminToken: true });
    expect((await fetch(`${first.urls.admin}${ADMIN_PATH}`)).status, 'an admin call with no token').toBe(401);
    expect(
      (
        await fetch(`${first.urls.admin}${ADMIN_PATH}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{"name":"x","source":"file:///x","profiles":[{"engine":"sim"}]}',
        })
      ).status,
      'a write with no token',
    ).toBe(401);
    expect(statSync(tokenFile).mode & 0o777, "the token file is its owner's alone").toBe(0o600);
    const token = read(tokenFile);
    expect(token.length, 'a real token').toBeGreaterThanOrEqual(32);
    expect(first.stderr(), 'the path is printed').toContain(tokenFile);
    expect(first.stderr(), 'the token itself is not').not.toContain(token);
    expect(
      (await fetch(`${first.urls.admin}${ADMIN_PATH}`, { headers: { authorization: `Bearer ${token}` } })).status,
      'with the token',
    ).toBe(200);
    // ctl sends a token from this directory only to the URL written beside it.
    const control = join(dir, 'control.json');
    await waitFor('control.json beside the token', () => (existsSync(control) ? true : undefined));
    expect(
      (JSON.parse(readFileSync(control, 'utf8')) as { admin_url: string }).admin_url,
      'the URL the token is for',
    ).toBe(first.urls.admin);
    expect(statSync(control).mode & 0o777).toBe(0o600);
    await first.stop();

    const again = await startControl(['--store', `sqlite:${join(dir, 'db')}`], { makesAdminToken: true });
    expect(read(tokenFile), 'the same token next start').toBe(token);
    expect(again.stderr()).toContain('made on an earlier start');
    expect((await fetch(`${again.urls.admin}${ADMIN_PATH}`)).status).toBe(401);
    expect(
      (await fetch(`${again.urls.admin}${ADMIN_PATH}`, { headers: { authorization: `Bearer ${token}` } })).status,
    ).toBe(200);
    await again.stop();
  });

  it('answers without a token only when started with --insecure-no-admin-token, and makes no token file then', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-sec-admin-open-'));
    const open = await startControl(['--store', `sqlite:${join(dir, 'db')}`, '--insecure-no-admin-token'], {
      makesAdminToken: true,
    });
    expect((await fetch(`${open.urls.admin}${ADMIN_PATH}`)).status, 'said outright: open on loopback').toBe(200);
    expect(existsSync(join(dir, 'admin-token'))).toBe(false);
    await open.stop();
  });
});

describe('a token given as a flag', () => {
  it('works, with a warning on stderr that ps shows it and what to use instead', async () => {
    // Attack: --join-token and --admin-token on a command line are every local user's to read.
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-sec-flag-'));
    const JOIN = 'sec-join-token-cmdline-0123456789';
    const ADMIN = 'sec-admin-token-cmdline-012345678';
    const control = await startControl(
      ['--store', `sqlite:${join(dir, 'db')}`, '--join-token', JOIN, '--admin-token', ADMIN],
      { makesAdminToken: true },
    );
    expect(control.stderr()).toContain('llmgw control: warning: --admin-token puts the token on the command line');
    expect(control.stderr()).toContain('use --admin-token-file FILE (owner-only) or LLMGW_ADMIN_TOKEN instead');
    expect(control.stderr()).toContain('llmgw control: warning: --join-token puts the token on the command line');
    expect(
      (await fetch(`${control.urls.admin}${'/api/v1/models'}`, { headers: { authorization: `Bearer ${ADMIN}` } }))
        .status,
      'the flag still works',
    ).toBe(200);
    expect(existsSync(join(dir, 'admin-token')), 'no token is made when one is given').toBe(false);

    const stateDir = join(dir, 'agent');
    stateDirs.push(stateDir);
    const agent = startLlmgw([
      'agent',
      '--control',
      control.urls.agent,
      '--join-token',
      JOIN,
      '--node-id',
      'flagged',
      '--state-dir',
      stateDir,
      '--simulate',
      'gpus=0,ram=4g',
      '--heartbeat-interval',
      '300ms',
    ]);
    await waitFor(
      () => `the agent's warning and its join; stderr:\n${agent.stderr()}`,
      async () => {
        const nodes = (await (
          await fetch(`${control.urls.admin}/api/v1/nodes`, { headers: { authorization: `Bearer ${ADMIN}` } })
        ).json()) as { id: string }[];
        return (
          agent.stderr().includes('llmgw agent: warning: --join-token puts the token on the command line') &&
          nodes.some((n) => n.id === 'flagged')
        );
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    expect(agent.stderr()).toContain('use --join-token-file FILE (owner-only) or LLMGW_JOIN_TOKEN instead');

    const quiet = await startControl(
      ['--store', `sqlite:${join(dir, 'db2')}`, '--admin-token-file', writeToken(dir, 'admin.txt', ADMIN)],
      { makesAdminToken: true },
    );
    expect(quiet.stderr(), 'a token from a file warns of nothing').not.toContain('warning');
  });
});

function writeToken(dir: string, name: string, token: string): string {
  const path = join(dir, name);
  writeFileSync(path, `${token}\n`, { mode: 0o600 });
  return path;
}
