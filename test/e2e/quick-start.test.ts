// The quick start as a user runs it: a fresh copy of the repository, the
// README's install-and-start command exactly as written, a chat completion
// through the router with the key it printed, then Ctrl-C (SIGINT to the
// whole foreground group, as a terminal sends it) and nothing left running.
// The commands are read from the README so the two cannot drift apart.
import { spawn } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { processesUnder } from '../support/processes.js';
import { StopWaiting, waitFor } from '../support/wait.js';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** The shell commands of the README's "Quick start" section, one per code block. */
function quickStartCommands(): string[] {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const section = readme.split(/^## /m).find((s) => s.startsWith('Quick start'));
  if (!section) throw new Error('README.md has no "## Quick start" section');
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!.trim());
}

describe('the README quick start', () => {
  it('is two commands, and the first brings up an llmgw that answers a chat completion and stops cleanly on Ctrl-C', async () => {
    const [start, test] = quickStartCommands();
    expect(test, 'the second command runs every test').toBe('npm test');
    expect(start, 'the first command installs and starts').toBe('npm ci && npm start');

    const dir = mkdtempSync(join(tmpdir(), 'llmgw-quick-start-'));
    // A fresh copy: what git tracks, nothing built, nothing installed.
    const files = execFileSync('git', ['ls-files', '-z'], { cwd: root, encoding: 'utf8' }).split('\0').filter(Boolean);
    execFileSync('tar', ['-cf', join(dir, 'src.tar'), '--null', '-T', '-'], { cwd: root, input: files.join('\0') });
    const copy = join(dir, 'llmgw');
    execFileSync('mkdir', ['-p', copy]);
    execFileSync('tar', ['-xf', join(dir, 'src.tar'), '-C', copy]);

    const child = spawn('sh', ['-c', start!], {
      cwd: copy,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, CI: 'true' },
    });
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      await waitFor(
        () => `the quick start to be ready:\n${stderr.slice(-4000)}`,
        () => {
          if (child.exitCode !== null)
            throw new StopWaiting(
              `the quick start exited (${child.exitCode}) before it was ready:\n${stderr.slice(-4000)}\n${stdout.slice(-2000)}`,
            );
          return stdout.includes('"msg":"llmgw up ready"');
        },
        { timeoutMs: 540_000, intervalMs: 250 },
      );
      const key = /API key\s+(\S+)/.exec(stderr)?.[1];
      expect(key, 'llmgw up prints the API key').toBeTruthy();
      const client = new OpenAI({ baseURL: 'http://127.0.0.1:8080/v1', apiKey: key! });
      const reply = await client.chat.completions.create({
        model: 'demo',
        messages: [{ role: 'user', content: 'Hello' }],
        max_tokens: 8,
      });
      expect(reply.choices[0]!.message.content, 'a real completion from the demo model').toBeTruthy();
      expect(reply.usage?.completion_tokens).toBe(8);

      // What an operator asks next, from the same copy, through ctl with up's defaults (./.llmgw).
      const ctl = (...args: string[]) =>
        execFileSync(process.execPath, ['bin/llmgw.js', ...args], { cwd: copy, encoding: 'utf8' });
      expect(ctl('--version').trim(), 'the version from package.json, not from npm run').toBe(
        JSON.parse(readFileSync(join(copy, 'package.json'), 'utf8')).version,
      );
      const { events } = JSON.parse(ctl('ctl', 'events', '-o', 'json')) as {
        events: { kind: string; model?: string }[];
      };
      const kinds = events.filter((e) => e.model === 'demo').map((e) => e.kind);
      // Newest first: however the startup went, the log ends with the demo model placed and ready.
      expect(kinds[0], `the demo model's last event (${kinds.join(', ')})`).toBe('replica_ready');
      expect(kinds, 'its placement is told too').toContain('replica_placed');
      type Node = { models_on_disk?: string[]; memory_gb?: number; memory_free_gb?: number };
      // The agent's next report (every 2 s under up) names the weights its engine uses.
      const node = await waitFor(
        'the node to report the demo GGUF on its disk',
        () => (JSON.parse(ctl('ctl', 'nodes', '-o', 'json')) as Node[]).find((n) => n.models_on_disk?.length),
        { timeoutMs: 30_000, intervalMs: 500 },
      );
      expect(node.models_on_disk, 'the demo GGUF, used in place').toEqual([
        join(copy, '.llmgw', 'models', 'demo.gguf'),
      ]);
      expect(node.memory_free_gb, 'RAM free beside its total').toBeLessThanOrEqual(node.memory_gb!);
    } finally {
      // Ctrl-C: SIGINT to the foreground process group.
      process.kill(-child.pid!, 'SIGINT');
    }
    await exited;
    await waitFor(
      () => `the quick start's processes to end: ${processesUnder(copy).join(', ')}`,
      () => processesUnder(copy).length === 0,
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    expect(processesUnder(copy), 'nothing the quick start started is still running').toEqual([]);
  }, 600_000);
});
