import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseEngineLoad } from './parse.js';

const fixture = (name: string) => readFileSync(new URL(`./fixtures/${name}`, import.meta.url), 'utf8');

describe('parseEngineLoad', () => {
  it.each([
    ['vllm-v1.prom', { running: 7, waiting: 3, kvUsage: 0.4375 }],
    // vLLM before kv_cache_usage_perc: the older name is read.
    ['vllm-v0.prom', { running: 12, waiting: 5, kvUsage: 0.9612 }],
    // Two data-parallel engines: their queues add up, the fuller cache counts, the newer KV name wins over the deprecated one.
    ['vllm-dp.prom', { running: 10, waiting: 2, kvUsage: 0.75 }],
    // llama.cpp no longer reports KV use: absent, not zero.
    ['llamacpp.prom', { running: 4, waiting: 2 }],
    ['llamacpp-old.prom', { running: 1, waiting: 0, kvUsage: 0.62 }],
    // Two tensor-parallel ranks report one scheduler: counted once.
    ['sglang.prom', { running: 9, waiting: 26, kvUsage: 0.28 }],
    // llmgw's builtin engine serves vLLM's names and llama.cpp's (src/engine/builtin/server.ts): vLLM's, with KV use, are read.
    ['builtin.prom', { running: 2, waiting: 1, kvUsage: 0.5 }],
  ])('reads %s', (name, want) => {
    expect(parseEngineLoad(fixture(name)), `the load in ${name}`).toEqual(want);
  });

  it('reads lines without labels, with a timestamp, and at the end without a newline', () => {
    expect(
      parseEngineLoad('vllm:num_requests_running 2 1700000000000\nvllm:num_requests_waiting{model_name="a b"} 1'),
    ).toEqual({ running: 2, waiting: 1 });
  });

  it('is null when no known running gauge is there (metrics off, another engine)', () => {
    expect(parseEngineLoad('')).toBeNull();
    expect(
      parseEngineLoad(
        '# HELP vllm:num_requests_running x\n# TYPE vllm:num_requests_running gauge\nprocess_cpu_seconds_total 3\n',
      ),
    ).toBeNull();
  });

  it('does not take a longer name that starts with a wanted one', () => {
    expect(parseEngineLoad('vllm:num_requests_running_total 9\nvllm:num_requests_running 1\n')).toEqual({
      running: 1,
      waiting: 0,
    });
  });

  it('skips values that are not numbers and clamps KV use into 0..1', () => {
    expect(
      parseEngineLoad('sglang:num_running_reqs{a="1"} NaN\nsglang:num_running_reqs{a="2"} 3\nsglang:token_usage 1.7\n'),
    ).toEqual({ running: 3, waiting: 0, kvUsage: 1 });
    expect(parseEngineLoad('llamacpp:requests_processing many\n')).toBeNull();
  });
});
