// Log files: rotation that an engine holding the file open follows, tails that
// reach into the rotated file, the lines quoted in a failure, and argv with
// secrets taken out before it is written anywhere.
import { closeSync, existsSync, mkdtempSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ShardLog, lastLines, redactArgv, redactSecret } from './shard-log.js';

const dir = mkdtempSync(join(tmpdir(), 'llmgw-shard-log-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('ShardLog', () => {
  it('rotates by copy and truncate, so an engine writing through its open descriptor carries on at the start of the live file', async () => {
    const log = new ShardLog(join(dir, 'rot.log'), { maxBytes: 100, filesKept: 3 });
    const fd = log.openForEngine();
    try {
      for (let i = 0; i < 10; i++) writeSync(fd, `first ${i} ${'x'.repeat(10)}\n`);
      expect(await log.rotateIfNeeded()).toBe(true);
      writeSync(fd, 'after rotation\n');
      expect(readFileSync(log.path, 'utf8'), 'the live file holds only what came after').toBe('after rotation\n');
      expect(readFileSync(`${log.path}.1`, 'utf8')).toMatch(/^first 0 .*first 9 x+\n$/s);
      expect(await log.rotateIfNeeded(), 'under the cap: left alone').toBe(false);
      for (let i = 0; i < 10; i++) writeSync(fd, `second ${i} ${'y'.repeat(10)}\n`);
      await log.rotateIfNeeded();
      for (let i = 0; i < 10; i++) writeSync(fd, `third ${i} ${'z'.repeat(10)}\n`);
      await log.rotateIfNeeded();
      expect(existsSync(`${log.path}.3`), 'three files kept: live, .1 and .2').toBe(false);
      expect(readFileSync(`${log.path}.2`, 'utf8')).toMatch(/^after rotation\nsecond 0/);
      expect(readFileSync(log.path, 'utf8'), 'the live file was just cut').toBe('');
      expect(log.tail(2), 'the tail reaches into .1').toEqual([
        `third 8 ${'z'.repeat(10)}`,
        `third 9 ${'z'.repeat(10)}`,
      ]);
    } finally {
      closeSync(fd);
    }
  });

  it('tails across the live and rotated files in order', async () => {
    const log = new ShardLog(join(dir, 'tail.log'), { maxBytes: 10, filesKept: 2 });
    log.note('one');
    log.note('two');
    await log.rotateIfNeeded();
    log.note('three');
    expect(log.tail(2)).toEqual(['[llmgw] two', '[llmgw] three']);
    expect(log.tail(10)).toEqual(['[llmgw] one', '[llmgw] two', '[llmgw] three']);
  });

  it("quotes only the latest run's own lines in a failure", () => {
    const log = new ShardLog(join(dir, 'runs.log'), { maxBytes: 1 << 20, filesKept: 2 });
    log.noteStart('vllm run 1');
    const fd = log.openForEngine();
    writeSync(fd, 'old run line\n');
    log.noteStart('vllm run 2');
    writeSync(fd, 'loading\n\nCUDA out of memory\n');
    log.note('pid 5 ended: code 1');
    closeSync(fd);
    expect(log.lastRunLines(5)).toEqual(['loading', 'CUDA out of memory']);
    expect(log.lastRunLines(1)).toEqual(['CUDA out of memory']);
  });

  it('reads whole lines from the end of a large file', () => {
    const log = new ShardLog(join(dir, 'big.log'), { maxBytes: 1 << 30, filesKept: 1 });
    const fd = log.openForEngine();
    // About 150 KiB: the tail crosses a 64 KiB chunk boundary.
    writeSync(fd, Array.from({ length: 3000 }, (_, i) => `line ${i} ${'.'.repeat(i % 80)}\n`).join(''));
    closeSync(fd);
    expect(lastLines(log.path, 2)).toEqual([
      `line 2998 ${'.'.repeat(2998 % 80)}`,
      `line 2999 ${'.'.repeat(2999 % 80)}`,
    ]);
    expect(lastLines(log.path, 2000)[0], 'a line that straddles two chunks comes out whole').toBe(
      `line 1000 ${'.'.repeat(1000 % 80)}`,
    );
  });
});

describe('redactArgv', () => {
  it('hides the values of key, token and secret flags, in both spellings', () => {
    expect(
      redactArgv([
        'vllm',
        'serve',
        '/m',
        '--api-key',
        'sk-1',
        '--hf-token=hf_x',
        '--port',
        '8000',
        '--max-model-len',
        '32k',
      ]),
    ).toEqual([
      'vllm',
      'serve',
      '/m',
      '--api-key',
      '<redacted>',
      '--hf-token=<redacted>',
      '--port',
      '8000',
      '--max-model-len',
      '32k',
    ]);
  });

  it('hides the value after --api-key even when it starts with "-", in both spellings', () => {
    // One engine secret in 64 started with "-", and redaction took such a value for the next flag and logged it
    // in the clear, in the agent's log and the engine's log file that ctl logs serves.
    expect(
      redactArgv(['python3', '-m', 'sglang.launch_server', '--api-key', '-Xk9_secret', '--port', '20001']),
    ).toEqual(['python3', '-m', 'sglang.launch_server', '--api-key', '<redacted>', '--port', '20001']);
    expect(redactArgv(['llmgw', 'engine', 'sim', '--api-key=-Xk9_secret', '--port', '20001'])).toEqual([
      'llmgw',
      'engine',
      'sim',
      '--api-key=<redacted>',
      '--port',
      '20001',
    ]);
    expect(
      redactArgv(['llmgw', 'engine', 'sim', '--api-key', '--port', '20001']),
      'a secret that is exactly a flag name is hidden too',
    ).toEqual(['llmgw', 'engine', 'sim', '--api-key', '<redacted>', '20001']);
  });

  it('does not take the flag after a value-less flag that names a token for a secret', () => {
    expect(redactArgv(['vllm', 'serve', '/m', '--skip-tokenizer-init', '--port', '8000'])).toEqual([
      'vllm',
      'serve',
      '/m',
      '--skip-tokenizer-init',
      '--port',
      '8000',
    ]);
  });
});

describe('redactSecret', () => {
  it("cuts an engine's key out of a log line that echoes its arguments, and leaves a line alone without one", () => {
    expect(redactSecret("INFO non-default args: {'api_key': ['k3y-XYZ'], 'port': 20001}", 'k3y-XYZ')).toBe(
      "INFO non-default args: {'api_key': ['<redacted>'], 'port': 20001}",
    );
    expect(redactSecret('api_key=k3y-XYZ again k3y-XYZ', 'k3y-XYZ')).toBe('api_key=<redacted> again <redacted>');
    expect(redactSecret('nothing here', undefined)).toBe('nothing here');
    expect(redactSecret('nothing here', '')).toBe('nothing here');
  });
});
