import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../errors/index.js';
import { parseContextLength, parseSimEngineArgs } from './cli.js';

function problemsOf(argv: string[]): string {
  try {
    parseSimEngineArgs(argv);
  } catch (e) {
    expect(e).toBeInstanceOf(ValidationError);
    return (e as ValidationError).message;
  }
  throw new Error(`${argv.join(' ')} was accepted`);
}

describe('parseSimEngineArgs', () => {
  it('maps every flag onto its option, --model repeatable in order', () => {
    expect(
      parseSimEngineArgs([
        '--host',
        '0.0.0.0',
        '--port=8001',
        '--model',
        'a',
        '--model',
        'b',
        '--ttft-ms',
        '25',
        '--tokens-per-second',
        '40',
        '--max-concurrency',
        '4',
        '--overflow',
        'reject',
        '--error-rate',
        '0.25',
        '--crash-after',
        '9',
        '--hang-after',
        '3',
        '--startup-delay-ms',
        '100',
        '--embedding-dim',
        '8',
        '--max-model-len',
        '32k',
        '--seed',
        '-3',
        '--flavor',
        'sglang',
      ]),
    ).toEqual({
      host: '0.0.0.0',
      port: 8001,
      models: ['a', 'b'],
      ttftMs: 25,
      tokensPerSecond: 40,
      maxConcurrency: 4,
      overflow: 'reject',
      errorRate: 0.25,
      crashAfterRequests: 9,
      hangAfterRequests: 3,
      startupDelayMs: 100,
      embeddingDim: 8,
      maxModelLen: 32000,
      seed: -3,
      flavor: 'sglang',
    });
    expect(parseSimEngineArgs(['--hang'])).toEqual({ hang: true });
  });

  it('names the flag, not the option key, in every problem', () => {
    expect(problemsOf(['--error-rate', '2'])).toContain('--error-rate:');
    expect(problemsOf(['--ttft-ms', 'soon'])).toContain('--ttft-ms: want a number, got "soon"');
    expect(problemsOf(['--overflow', 'drop'])).toContain('--overflow:');
    expect(problemsOf(['--port'])).toContain('--port: needs a value');
  });

  it('suggests the flag meant by a shortened or mistyped one', () => {
    expect(problemsOf(['--ttft', '5'])).toContain('did you mean --ttft-ms?');
    expect(problemsOf(['--modle', 'x'])).toContain('did you mean --model?');
    expect(problemsOf(['serve'])).toContain('unexpected argument');
  });
});

describe("the sim's API key", () => {
  // The agent passed it as --api-key=SECRET, which every user of the node read in ps (issue 33): it now comes from a variable or a file.
  it('comes from LLMGW_ENGINE_API_KEY, or --api-key-file, or --api-key, and is absent when none is given', () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-sim-key-'));
    const file = join(dir, 'key');
    writeFileSync(file, 'k-file\n', { mode: 0o600 });
    expect(parseSimEngineArgs([], { LLMGW_ENGINE_API_KEY: 'k-env' })).toEqual({ apiKey: 'k-env' });
    expect(
      parseSimEngineArgs(['--api-key-file', file], { LLMGW_ENGINE_API_KEY: 'k-env' }),
      'a flag wins over the variable',
    ).toEqual({ apiKey: 'k-file' });
    expect(parseSimEngineArgs(['--api-key', 'k-flag'])).toEqual({ apiKey: 'k-flag' });
    expect(parseSimEngineArgs([], { LLMGW_ENGINE_API_KEY: '' }), 'an empty variable is no key').toEqual({});
    expect(parseSimEngineArgs([]), 'the environment is read only when given').toEqual({});
  });

  it('refuses a key file it cannot read, an empty one, or both flags, rather than start open', () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-sim-key-'));
    writeFileSync(join(dir, 'empty'), '\n');
    expect(problemsOf(['--api-key-file', join(dir, 'none')])).toContain('ENOENT');
    expect(problemsOf(['--api-key-file', join(dir, 'empty')])).toContain('is empty');
    expect(problemsOf(['--api-key', 'a', '--api-key-file', join(dir, 'empty')])).toContain('both given');
  });
});

describe('parseContextLength', () => {
  it('reads lengths the way vLLM does: k = 1000, K = 1024', () => {
    expect(parseContextLength('4096')).toBe(4096);
    expect(parseContextLength('32k')).toBe(32_000);
    expect(parseContextLength('32K')).toBe(32_768);
    expect(parseContextLength('1M')).toBe(1_048_576);
    expect(parseContextLength('lots')).toBeNaN();
  });
});
