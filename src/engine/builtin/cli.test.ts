// `llmgw engine builtin` as the agent runs it: a child process. These tests
// run the built CLI function (dist/, built by the test setup) in a fresh
// Node, so that exit codes, stderr and signals are the real ones.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { makeTinyModel } from '../../dev/make-model/index.js';
import { parseBuiltinEngineArgs } from './cli.js';
import { StopWaiting, waitFor } from '../../../test/support/wait.js';

const ENGINE_MODULE = fileURLToPath(new URL('../../../dist/engine/builtin/index.js', import.meta.url));
// A script file, not `node -e`: node-llama-cpp tests its binary in a child that inherits execArgv.
const CHILD_SCRIPT = `const { runBuiltinEngineCli } = await import(process.env.LLMGW_ENGINE_MODULE); await runBuiltinEngineCli(process.argv.slice(2));\n`;

let dir: string;
let modelPath: string;
let scriptPath: string;
const children = new Set<ChildProcess>();

interface Child {
  process: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
}

function startEngine(args: string[]): Child {
  const child = spawn(process.execPath, [scriptPath, ...args], {
    env: { ...process.env, LLMGW_ENGINE_MODULE: ENGINE_MODULE },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  let out = '';
  let err = '';
  child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr!.on('data', (b: Buffer) => (err += b.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  void exited.then(() => children.delete(child));
  return { process: child, stdout: () => out, stderr: () => err, exited };
}

function withDeadline<T>(promise: Promise<T>, what: string, ms = 45_000): Promise<T> {
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`timed out: ${what}`)), ms).unref()),
  ]);
}

beforeAll(async () => {
  if (!existsSync(ENGINE_MODULE))
    throw new Error(`${ENGINE_MODULE} is missing: run \`npm run build\` (vitest's global setup does)`);
  dir = await mkdtemp(join(tmpdir(), 'llmgw-builtin-cli-'));
  modelPath = join(dir, 'tiny.gguf');
  scriptPath = join(dir, 'engine.mjs');
  await makeTinyModel(modelPath);
  await writeFile(scriptPath, CHILD_SCRIPT);
});

afterEach(() => {
  for (const child of children) child.kill('SIGKILL');
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('llmgw engine builtin (child process)', () => {
  it('serves the OpenAI API once it prints its URL, and exits 0 on SIGTERM', async () => {
    const child = startEngine([
      '--model',
      modelPath,
      '--port',
      '0',
      '--alias',
      'tiny',
      '--threads',
      '1',
      '--ctx-size',
      '256',
    ]);
    const url = await waitFor(
      () => `the ready line; stderr:\n${child.stderr()}`,
      () => {
        if (child.process.exitCode !== null)
          throw new StopWaiting(
            `the engine exited (${child.process.exitCode}) before its ready line; stderr:\n${child.stderr()}`,
          );
        return /builtin engine listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(child.stdout())?.[1];
      },
      { timeoutMs: 45_000, intervalMs: 20 },
    );
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const reply = await client.chat.completions.create({
      model: 'tiny',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 4,
    });
    expect(reply.usage?.completion_tokens).toBe(4);
    expect(reply.choices[0]!.message.content!.length).toBeGreaterThan(0);

    child.process.kill('SIGTERM');
    expect(await withDeadline(child.exited, 'the engine exits after SIGTERM'), child.stderr()).toBe(0);
    expect(child.stderr()).toContain('builtin engine stopped');
  });

  it('exits 1 with LLMGW_GGUF_INVALID on stderr for a truncated model, before listening', async () => {
    const truncated = join(dir, 'truncated.gguf');
    const bytes = await readFile(modelPath);
    await writeFile(truncated, bytes.subarray(0, Math.floor(bytes.length * 0.7)));
    const child = startEngine(['--model', truncated, '--port', '0']);
    expect(await withDeadline(child.exited, 'the engine refuses the truncated file')).toBe(1);
    expect(child.stderr()).toMatch(
      /^llmgw engine builtin: LLMGW_GGUF_INVALID: .*truncated\.gguf is not a usable GGUF file: .*truncated/m,
    );
    expect(child.stdout(), 'it never claimed to listen').not.toContain('listening');
  });

  it('exits 1 for a header claiming absurd counts', async () => {
    const crafted = join(dir, 'crafted.gguf');
    const header = Buffer.alloc(64);
    header.write('GGUF', 0, 'latin1');
    header.writeUInt32LE(3, 4);
    header.writeBigUInt64LE(0n, 8);
    header.writeBigUInt64LE(2n ** 63n, 16);
    await writeFile(crafted, header);
    const child = startEngine(['--model', crafted, '--port', '0']);
    expect(await withDeadline(child.exited, 'the engine refuses the crafted header')).toBe(1);
    expect(child.stderr()).toContain('LLMGW_GGUF_INVALID');
    expect(child.stderr()).toContain('metadata entries');
  });
});

describe('parseBuiltinEngineArgs', () => {
  it('maps the agent flags to options', () => {
    expect(
      parseBuiltinEngineArgs([
        '--model',
        'm.gguf',
        '--port',
        '9000',
        '--host',
        '0.0.0.0',
        '--alias',
        'a',
        '--alias',
        'b',
        '--threads',
        '3',
        '--parallel',
        '2',
        '--max-queue',
        '0',
        '--ctx-size',
        '8192',
      ]),
    ).toEqual({
      modelPath: 'm.gguf',
      port: 9000,
      host: '0.0.0.0',
      aliases: ['a', 'b'],
      threads: 3,
      parallel: 2,
      maxQueue: 0,
      contextTokens: 8192,
    });
  });

  it('takes the certificate and key the agent passes under --engine-tls', () => {
    expect(parseBuiltinEngineArgs(['--model', 'm.gguf', '--tls-cert', '/p/c.pem', '--tls-key', '/p/k.pem'])).toEqual({
      modelPath: 'm.gguf',
      tlsCert: '/p/c.pem',
      tlsKey: '/p/k.pem',
    });
  });

  it('takes the API key from LLMGW_ENGINE_API_KEY or --api-key-file, as the agent now gives it, off the command line', async () => {
    // The agent passed it as --api-key=SECRET, which every user of the node read in ps (issue 33).
    const file = join(dir, 'engine-key');
    await writeFile(file, 'k-file\n', { mode: 0o600 });
    expect(parseBuiltinEngineArgs(['--model', 'm.gguf'], { LLMGW_ENGINE_API_KEY: 'k-env' })).toEqual({
      modelPath: 'm.gguf',
      apiKey: 'k-env',
    });
    expect(
      parseBuiltinEngineArgs(['--model', 'm.gguf', '--api-key-file', file], { LLMGW_ENGINE_API_KEY: 'k-env' }),
    ).toEqual({ modelPath: 'm.gguf', apiKey: 'k-file' });
    expect(parseBuiltinEngineArgs(['--model', 'm.gguf'], {})).toEqual({ modelPath: 'm.gguf' });
    expect(() => parseBuiltinEngineArgs(['--model', 'm.gguf', '--api-key-file', join(dir, 'no-such-key')], {})).toThrow(
      /cannot be read: ENOENT/,
    );
  });

  it('warns on stderr when the key is given as --api-key, which ps shows to every user', async () => {
    const child = startEngine(['--model', modelPath, '--port', '0', '--api-key', 'k-flag']);
    // Until its ready line the engine has no SIGTERM handler of its own yet; the key is served once it listens.
    await waitFor(
      () => `the ready line; stderr:\n${child.stderr()}`,
      () => child.stdout().includes('builtin engine listening on'),
      { timeoutMs: 45_000, intervalMs: 20 },
    );
    expect(child.stderr()).toContain('--api-key puts the key on the command line');
    expect(child.stderr()).toContain('LLMGW_ENGINE_API_KEY');
    child.process.kill('SIGTERM');
    expect(await withDeadline(child.exited, 'the engine to exit')).toBe(0);
  });

  it('names the nearest flag and shows the usage for a mistake', () => {
    expect(() => parseBuiltinEngineArgs(['--model', 'm.gguf', '--thread', '2'])).toThrow(
      /did you mean --threads\?[\s\S]*usage: llmgw engine builtin/,
    );
    expect(() => parseBuiltinEngineArgs(['--port', '1'])).toThrow(/--model is required/);
    expect(() => parseBuiltinEngineArgs(['--model', 'm.gguf', '--threads', 'many'])).toThrow(
      /--threads takes a whole number/,
    );
  });
});
