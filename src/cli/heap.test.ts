import { describe, expect, it } from 'vitest';
import { heapGrowingFlag, type RestartableProcess, youngGenerationArgs, youngGenerationRestart } from './heap.js';

describe('the heap growing setting', () => {
  it('sets the percent asked, none for 0, and leaves a value node was started with alone', () => {
    expect(heapGrowingFlag(50, [])).toBe('--heap-growing-percent=50');
    expect(heapGrowingFlag(0, []), "0 = V8's own heuristic").toBeNull();
    expect(
      heapGrowingFlag(50, ['--max-semi-space-size=64', '--heap-growing-percent=20']),
      "the operator's own flag wins",
    ).toBeNull();
    expect(heapGrowingFlag(50, ['--heap_growing_percent=20'])).toBeNull();
    expect(heapGrowingFlag(50, ['--heap-growing-percentile'])).toBe('--heap-growing-percent=50');
  });
});

describe("the gateway workers' young generation", () => {
  it('is set to 64 MiB a semi-space unless node was given one, in its arguments or NODE_OPTIONS', () => {
    expect(youngGenerationArgs([], undefined)).toEqual(['--max-semi-space-size=64']);
    expect(youngGenerationArgs(['--enable-source-maps'], '--max-old-space-size=4096')).toEqual([
      '--enable-source-maps',
      '--max-semi-space-size=64',
    ]);
    expect(youngGenerationArgs(['--max-semi-space-size=16'], undefined), "the operator's own wins").toEqual([
      '--max-semi-space-size=16',
    ]);
    expect(youngGenerationArgs([], '--trace-warnings --max_semi_space_size=32'), 'in NODE_OPTIONS too').toEqual([]);
    expect(youngGenerationArgs(['--max-semi-space-sizes'], undefined)).toHaveLength(2);
  });
});

describe('restarting llmgw control, up and a one-process gateway with the young generation', () => {
  const execve = (() => {
    throw new Error('not called by youngGenerationRestart');
  }) as RestartableProcess['execve'];
  const proc = (over: Partial<RestartableProcess>): RestartableProcess => ({
    execPath: '/usr/bin/node',
    execArgv: [],
    argv: ['/usr/bin/node', '/opt/llmgw/bin/llmgw.js', 'control', '--config', 'c.yaml'],
    env: {},
    execve,
    ...over,
  });

  it('runs the same command line again with the flag before the script, where Node can', () => {
    expect(youngGenerationRestart(proc({ execArgv: ['--enable-source-maps'] }))).toEqual([
      '/usr/bin/node',
      '--enable-source-maps',
      '--max-semi-space-size=64',
      '/opt/llmgw/bin/llmgw.js',
      'control',
      '--config',
      'c.yaml',
    ]);
  });

  it('does not where the operator set one, or once restarted (no loop), or where Node has no execve', () => {
    expect(youngGenerationRestart(proc({ execArgv: ['--max-semi-space-size=16'] }))).toBeNull();
    expect(youngGenerationRestart(proc({ env: { NODE_OPTIONS: '--max-semi-space-size=32' } }))).toBeNull();
    const restarted = youngGenerationRestart(proc({}))!;
    expect(youngGenerationRestart(proc({ execArgv: restarted.slice(1, -4) })), 'the restarted process').toBeNull();
    expect(youngGenerationRestart(proc({ execve: undefined })), 'Node 20: no process.execve').toBeNull();
  });
});
