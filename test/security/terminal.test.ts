// A node writing into the operator's terminal (issue 33, finding 2), replayed
// against a real control plane over loopback with a node forged from the join
// token alone and the real `llmgw ctl`. The attack: a joined node reported a
// hostname, labels, GPU names, disk paths and shard errors holding escape
// sequences and newlines, and `ctl nodes`, `node`, `disk`, `summary`,
// `events`, `replicas`, `explain` and `logs` printed them raw: the screen was
// cleared, the window title set, an OSC 52 sequence wrote the admin's
// clipboard, and a line reading like ctl's own ("replica … is healthy")
// appeared. Names are now refused by the protocol; free text (errors, GPU
// problems, paths, log lines, server messages quoting them) is printed with
// its control characters made visible.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NodeView, ReplicaView } from '../../src/api/index.js';
import { NodeProber } from '../../src/agent/probe/index.js';
import { CTL_ARGV, type CtlResult, runCtlCli } from '../e2e/ctl-support.js';
import { startControl, stopAll } from '../support/processes.js';
import { waitFor } from '../support/wait.js';

const JOIN = 'e2e-join-token-terminal-0123456789';
const ADMIN = 'e2e-admin-token-terminal-012345678';
const admin = { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' };

/** A line that reads like ctl's own, to be forged after a newline. */
const FAKE = 'replica r-0000 of evil-fail is healthy';
/** Clear the screen, home the cursor, set the window title, write the clipboard (OSC 52: "rm -rf ~"), CR-LF and a fake line, an 8-bit CSI, DEL. */
const ATTACK = `boom\x1b[2J\x1b[H\x1b]0;owned\x07\x1b]52;c;cm0gLXJmIH4=\x07\r\n${FAKE}\x9b31m\x7f`;
/** How the attack reads once ctl has made it visible: proof that the hostile text reached the output, shown. */
const SHOWN = '\\x1b]52;c;cm0gLXJmIH4=\\x07';

let dir = '';
let adminUrl = '';
let agentUrl = '';
const servers: Server[] = [];
let beating: NodeJS.Timeout | undefined;
// A private tmux server for the terminal replay: the developer's sessions are never touched, and kill-server ends only this one.
const SOCKET = `llmgw-terminal-test-${process.pid}-${Date.now()}`;

function tmux(...args: string[]): string {
  return execFileSync('tmux', ['-L', SOCKET, ...args], { encoding: 'utf8' });
}

async function api<T>(path: string): Promise<T> {
  const res = await fetch(`${adminUrl}${path}`, { headers: admin });
  expect(res.status, path).toBe(200);
  return (await res.json()) as T;
}

async function agentCall(path: string, body: unknown, credential?: string): Promise<{ status: number; text: string }> {
  const res = await fetch(`${agentUrl}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(credential ? { authorization: `Bearer ${credential}` } : {}) },
    body: JSON.stringify(body),
  });
  return { status: res.status, text: await res.text() };
}

function ctl(...args: string[]): Promise<CtlResult> {
  return runCtlCli(args, { env: { LLMGW_ADMIN_URL: adminUrl, LLMGW_ADMIN_TOKEN: ADMIN } });
}

/** ctl with --watch (or follow): started, read until `enough` holds, then Ctrl-C, as an operator does. */
function ctlWatching(args: string[], enough: (stdout: string) => boolean): Promise<CtlResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...CTL_ARGV, ...args], {
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '',
        LLMGW_ADMIN_URL: adminUrl,
        LLMGW_ADMIN_TOKEN: ADMIN,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    let interrupted = false;
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new Error(`llmgw ctl ${args.join(' ')} never printed what was awaited; stdout:\n${stdout}\nstderr:\n${stderr}`),
      );
    }, 30_000);
    child.stdout.setEncoding('utf8').on('data', (s: string) => {
      stdout += s;
      if (!interrupted && enough(stdout)) {
        interrupted = true;
        child.kill('SIGINT');
      }
    });
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/**
 * What no output may hold: ESC (so no CSI, OSC 52 or title), BEL, CR, an
 * 8-bit CSI, DEL; and, where `oneLine`, the forged line at the start of a line
 * or of a table cell: it may only appear after the visible "\n" it came with.
 */
function expectHarmless(what: string, r: CtlResult, options: { oneLine?: boolean; shown?: boolean } = {}): void {
  for (const [stream, text] of [
    ['stdout', r.stdout],
    ['stderr', r.stderr],
  ] as const) {
    const bad = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/.exec(text); // eslint-disable-line no-control-regex
    expect(
      bad,
      `${what}: ${stream} holds U+${bad?.[0].charCodeAt(0).toString(16).padStart(4, '0')} at ${bad?.index}:\n${text}`,
    ).toBeNull();
    if (options.oneLine ?? true) {
      const forged = text
        .split(FAKE)
        .slice(0, -1)
        .filter((before) => !before.endsWith('\\r\\n'));
      expect(forged, `${what}: ${stream} prints the forged line as a line of its own:\n${text}`).toEqual([]);
    }
  }
  if (options.shown ?? true)
    expect(`${r.stdout}${r.stderr}`, `${what}: the hostile text is shown, escaped`).toContain(SHOWN);
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'llmgw-security-terminal-'));
  const control = await startControl([
    '--store',
    `sqlite:${join(dir, 'db')}`,
    '--join-token',
    JOIN,
    '--admin-token',
    ADMIN,
    '--reconcile-interval',
    '300ms',
    '--log-level',
    'warn',
  ]);
  adminUrl = control.urls.admin;
  agentUrl = control.urls.agent;
}, 60_000);

afterAll(async () => {
  if (beating) clearInterval(beating);
  try {
    tmux('kill-server');
  } catch {
    // No server was started: nothing to end.
  }
  await stopAll();
  for (const s of servers) s.close();
});

describe('a node cannot name itself with control characters', () => {
  it('refuses a join whose hostname, label or agent version holds one, with 400 naming the field', async () => {
    const base = { join_token: JOIN, node_id: 'hostile', protocol_version: 1 };
    const cases = [
      ['hostname', { hostname: ATTACK }, /hostname: hostname holds a control character \(U\+001B\)/],
      ['label value', { labels: { pool: ATTACK } }, /labels\.pool: label value holds a control character/],
      [
        'label key',
        { labels: { [`pool\n${FAKE}`]: 'a' } },
        /labels\[.*\]: label key holds a control character \(U\+000A\)/,
      ],
      ['agent version', { agent_version: ATTACK }, /agent_version: agent version holds a control character/],
    ] as const;
    for (const [what, extra, names] of cases) {
      const res = await agentCall('/agent/v1/join', { ...base, ...extra });
      expect(res.status, `${what}: ${res.text}`).toBe(400);
      expect(res.text, what).toMatch(names);
      expect(res.text, `${what}: the refusal does not echo the control characters`).not.toMatch(/\\u001b|\\u0007/);
    }
    const nodes = await api<NodeView[]>('/api/v1/nodes');
    expect(
      nodes.map((n) => n.id),
      'none of them joined',
    ).not.toContain('hostile');
  });

  it('keeps out a report whose GPU names hold one: the node is not shown with them', async () => {
    const joined = await agentCall('/agent/v1/join', {
      join_token: JOIN,
      node_id: 'hostile-report',
      hostname: 'hostile-report',
      protocol_version: 1,
    });
    expect(joined.status, joined.text).toBe(200);
    const { credential } = JSON.parse(joined.text) as { credential: string };
    const report = await new NodeProber({
      cacheDir: join(dir, 'hr-cache'),
      modelDirs: [],
      fabrics: [],
      simulate: 'gpus=1xh100-80gb,ram=16g',
      simulateSeed: 'hr',
    }).probe();
    report.gpus = report.gpus!.map((g) => ({ ...g, name: `NVIDIA ${ATTACK}`, class: `h100${ATTACK}` }));
    const beat = await agentCall(
      '/agent/v1/heartbeat',
      { node_id: 'hostile-report', protocol_version: 1, report },
      credential,
    );
    expect(beat.status, 'a bad report keeps the previous one; the heartbeat itself stands').toBe(200);
    const node = await api<{ node: NodeView }>('/api/v1/nodes/hostile-report');
    expect(JSON.stringify(node), 'no GPU name or class from the refused report').not.toMatch(/\\u001b|owned/);
  });
});

describe('ctl prints what a node, an engine or a client wrote without letting it drive the terminal', () => {
  let runReplica = '';

  beforeAll(async () => {
    // The forged node's management API: the engine log ctl asks for, hostile, or a refusal quoting hostile text.
    const mgmt = createServer((req, res) => {
      if (/lines=7\b/.test(req.url ?? '')) {
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.end(`agent broke: ${ATTACK}`);
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ lines: ['INFO\tengine starting', `ERROR ${ATTACK}`, 'INFO\tstill here'] }));
    });
    await new Promise<void>((resolve) => mgmt.listen(0, '127.0.0.1', resolve));
    servers.push(mgmt);
    const mgmtPort = (mgmt.address() as AddressInfo).port;

    const joined = await agentCall('/agent/v1/join', {
      join_token: JOIN,
      node_id: 'evil',
      hostname: 'evil',
      labels: { pool: 'evil' },
      agent_version: '0.0.0-evil',
      protocol_version: 1,
      mgmt_addr: `127.0.0.1:${mgmtPort}`,
      engine_host: '127.0.0.1',
      port_range: { first: 29000, last: 29099 },
    });
    expect(joined.status, joined.text).toBe(200);
    const { credential } = JSON.parse(joined.text) as { credential: string };
    const cacheDir = join(dir, 'evil-cache');
    const probed = await new NodeProber({
      cacheDir,
      modelDirs: [],
      fabrics: [],
      simulate: 'gpus=1xh100-80gb,ram=16g',
      simulateSeed: 'evil',
    }).probe();
    // Free text a node may send: a GPU's problems, the paths on its disk, its weights' paths, an engine's version.
    const report = {
      ...probed,
      engine_host: '127.0.0.1',
      port_range: { first: 29000, last: 29099 },
      gpus: probed.gpus!.map((g) => ({ ...g, problems: [`XID 79 ${ATTACK}`] })),
      disks: [
        {
          mount_point: '/',
          fs_type: 'ext4',
          shared: false,
          free_bytes: 5e11,
          total_bytes: 1e12,
          paths: [cacheDir, `/models/${ATTACK}`],
        },
      ],
      weights: [{ path: `/models/${ATTACK}`, kind: 'model_dir', size_bytes: 1e9 }],
      model_dirs: [`/models/${ATTACK}`],
      engines: (probed.engines ?? []).map((e) => ({ ...e, version: `1.0 ${ATTACK}` })),
    };
    let shards: Record<string, unknown>[] = [];
    const beat = async () => {
      const res = await agentCall(
        '/agent/v1/heartbeat',
        { node_id: 'evil', protocol_version: 1, report, shards },
        credential,
      );
      if (res.status !== 200) return;
      const assigned = (JSON.parse(res.text) as { shards: { shard_id: string; replica_id: string; model: string }[] })
        .shards;
      // evil-fail's engine fails with a hostile error; evil-run's keeps starting, so its log can be asked for.
      shards = assigned.map((a) =>
        a.model === 'evil-fail'
          ? { shard_id: a.shard_id, replica_id: a.replica_id, state: 'failed', error: ATTACK }
          : { shard_id: a.shard_id, replica_id: a.replica_id, state: 'starting' },
      );
    };
    await beat();
    beating = setInterval(() => void beat().catch(() => undefined), 250);

    for (const name of ['evil-fail', 'evil-run']) {
      const res = await fetch(`${adminUrl}/api/v1/models?force=true`, {
        method: 'POST',
        headers: admin,
        body: JSON.stringify({
          name,
          source: `file://${join(dir, 'weights')}`,
          scaling: { min: 1 },
          profiles: [{ engine: 'sim', pool: 'pool=evil' }],
        }),
      });
      expect(res.status, await res.text()).toBe(200);
    }
    runReplica = (
      await waitFor('evil-run placed on the forged node', async () =>
        (await api<ReplicaView[]>('/api/v1/replicas?model=evil-run')).find((r) => r.state === 'starting'),
      )
    ).id;
    await waitFor('an evil-fail replica failed with the hostile error', async () =>
      (await api<ReplicaView[]>('/api/v1/replicas?model=evil-fail')).find((r) => r.error?.includes(FAKE))
        ? true
        : undefined,
    );
  }, 120_000);

  it('ctl nodes and ctl node', async () => {
    expectHarmless('ctl nodes', await ctl('nodes'), { shown: false });
    expectHarmless('ctl node evil', await ctl('node', 'evil'));
  });

  it('ctl disk', async () => {
    expectHarmless('ctl disk evil', await ctl('disk', 'evil'));
  });

  it('ctl summary, ctl replicas, ctl explain', async () => {
    expectHarmless('ctl summary', await ctl('summary'));
    expectHarmless('ctl replicas', await ctl('replicas'));
    expectHarmless('ctl explain evil-fail', await ctl('explain', 'evil-fail'));
  });

  it('ctl events, once and with --watch', async () => {
    expectHarmless('ctl events', await ctl('events'));
    expectHarmless('ctl events --watch', await ctlWatching(['events', '--watch'], (s) => s.includes(SHOWN)));
  });

  it('ctl replicas --watch', async () => {
    expectHarmless('ctl replicas --watch', await ctlWatching(['replicas', '--watch'], (s) => s.includes(SHOWN)));
  });

  it("ctl logs keeps the log's lines and tabs and escapes the rest; a refusal relayed from the node is escaped too", async () => {
    const logs = await ctl('logs', runReplica);
    expect(logs.code, logs.stderr).toBe(0);
    // Each element is one line of the engine's log: a newline inside one is shown as \n, so the forged
    // text cannot pass for a line of its own (as it did while log lines kept their newlines).
    expectHarmless('ctl logs', logs);
    expect(logs.stdout.split('\n').slice(0, 1), 'a tab in a log line is kept').toEqual(['INFO\tengine starting']);
    // The node's refusal is a 5xx, whose words the control plane keeps to its log; what ctl says of it is harmless.
    const refused = await ctl('logs', runReplica, '-n', '7');
    expect(refused.code).toBe(1);
    expectHarmless('ctl logs (refused)', refused, { shown: false });
  });

  it("an error message from the server is escaped, and none of its lines passes for ctl's own", async () => {
    // A server message quoting hostile text, on several lines (as a refused model file's is): an admin API that says so.
    const liar = createServer((_req, res) => {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: `model evil refused: ${ATTACK}\n${FAKE}` }));
    });
    await new Promise<void>((resolve) => liar.listen(0, '127.0.0.1', resolve));
    servers.push(liar);
    const r = await runCtlCli(['summary'], {
      env: { LLMGW_ADMIN_URL: `http://127.0.0.1:${(liar.address() as AddressInfo).port}`, LLMGW_ADMIN_TOKEN: ADMIN },
    });
    expect(r.code).toBe(1);
    expectHarmless('ctl summary (refused)', r, { oneLine: false });
    expect(
      r.stderr.split('\n').filter((l) => l.startsWith(FAKE)),
      `no line of the message starts with the forged text:\n${r.stderr}`,
    ).toEqual([]);
    expect(r.stderr, 'the message keeps its lines, each after the first indented').toContain(`\n  ${FAKE}`);
  });

  it("at a real terminal, with colour on, the window title, the clipboard and the screen stay the operator's", async () => {
    // tmux keeps what a program sets: the pane's title (OSC 0/2) and, with set-clipboard on, a paste buffer (OSC 52).
    tmux('new-session', '-d', '-s', 'boot', '-x', '250', '-y', '100');
    tmux('set-option', '-g', 'set-clipboard', 'on');
    const run = async (session: string, args: string[]): Promise<string> => {
      const quoted = [process.execPath, ...CTL_ARGV, ...args].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
      tmux(
        'new-session',
        '-d',
        '-s',
        session,
        '-x',
        '250',
        '-y',
        '100',
        '-e',
        `LLMGW_ADMIN_URL=${adminUrl}`,
        '-e',
        `LLMGW_ADMIN_TOKEN=${ADMIN}`,
        `${quoted}; echo "EXIT=$?"; exec cat`,
      );
      // -J joins lines the terminal wrapped; -e keeps the colours, which must be there (a terminal gets colour).
      return waitFor(`ctl ${args.join(' ')} to finish in the terminal`, async () => {
        const s = tmux('capture-pane', '-p', '-J', '-e', '-t', session);
        return s.includes('EXIT=') ? s : undefined;
      });
    };
    const strip = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, ''); // eslint-disable-line no-control-regex
    const node = await run('node', ['node', 'evil']);
    expect(strip(node)).toContain('EXIT=0');
    expect(node, 'colour is on').toMatch(/\x1b\[[0-9;]*m/); // eslint-disable-line no-control-regex
    expect(strip(node).split('\n')[0], 'the screen was not cleared: the first line is still the heading').toMatch(
      /^node evil /,
    );
    expect(strip(node), 'the hostile text is on the screen, escaped').toContain(SHOWN);
    expect(
      strip(node)
        .split('\n')
        .filter((l) => l.trimStart().startsWith(FAKE)),
      'no forged line',
    ).toEqual([]);
    const logs = await run('logs', ['logs', runReplica]);
    expect(strip(logs)).toContain('EXIT=0');
    expect(strip(logs).split('\n')[0], 'the screen was not cleared').toMatch(/^replica /);
    for (const session of ['node', 'logs']) {
      expect(
        tmux('display-message', '-p', '-t', session, '#{pane_title}'),
        `${session}: the window title is not the node's`,
      ).not.toContain('owned');
    }
    expect(tmux('list-buffers'), 'nothing was written to the clipboard').toBe('');
  });

  it("-o json stays the API's JSON, with every control character escaped", async () => {
    const r = await ctl('node', 'evil', '-o', 'json');
    expectHarmless('ctl node -o json', r, { shown: false });
    expect(JSON.stringify(JSON.parse(r.stdout)), 'the value itself, unchanged').toContain(
      JSON.stringify(ATTACK).slice(1, -1),
    );
  });
});
