import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { intervalHitRate, parseEngineLoad } from './parse.js';

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

describe('the prefix cache hit rate', () => {
  const vllm = (queries: number, hits: number) =>
    parseEngineLoad(
      'vllm:num_requests_running 0\n' +
        `vllm:prefix_cache_queries_total{engine="0",model_name="m"} ${queries}\n` +
        `vllm:prefix_cache_hits_total{engine="0",model_name="m"} ${hits}\n`,
    )!;

  it("reads vLLM's counters, summed over data-parallel engines", () => {
    expect(vllm(1000, 250).cacheCounters).toEqual({ queries: 1000, hits: 250 });
    const dp = parseEngineLoad(
      'vllm:num_requests_running{engine="0"} 0\nvllm:num_requests_running{engine="1"} 0\n' +
        'vllm:prefix_cache_queries_total{engine="0"} 100\nvllm:prefix_cache_queries_total{engine="1"} 300\n' +
        'vllm:prefix_cache_hits_total{engine="0"} 50\nvllm:prefix_cache_hits_total{engine="1"} 150\n',
    );
    expect(dp?.cacheCounters).toEqual({ queries: 400, hits: 200 });
  });

  it('is the growth of hits over the growth of queries between two scrapes', () => {
    const first = vllm(1000, 250).cacheCounters!;
    const second = vllm(1400, 550).cacheCounters!;
    expect(intervalHitRate(first, second), '300 of 400 new tokens hit').toBe(0.75);
    expect(intervalHitRate(undefined, first), 'the first scrape: since the engine started').toBe(0.25);
    expect(intervalHitRate(second, second), 'nothing queried since: no rate (the caller keeps its last)').toBe(
      undefined,
    );
    expect(intervalHitRate(undefined, { queries: 0, hits: 0 }), 'nothing ever queried').toBe(undefined);
  });

  it('counts from zero again after a counter went down (the engine restarted)', () => {
    const before = vllm(5000, 4000).cacheCounters!;
    const after = vllm(200, 50).cacheCounters!;
    // Not (50-4000)/(200-5000), which would be above 1: the restarted engine's own counts.
    expect(intervalHitRate(before, after)).toBe(0.25);
  });

  it("takes SGLang's gauge as it is, averaged over schedulers and clamped into 0..1", () => {
    expect(parseEngineLoad('sglang:num_running_reqs 1\nsglang:cache_hit_rate{tp_rank="0"} 0.6\n')).toEqual({
      running: 1,
      waiting: 0,
      cacheHitRate: 0.6,
    });
    expect(
      parseEngineLoad(
        'sglang:num_running_reqs{dp_rank="0"} 1\nsglang:cache_hit_rate{dp_rank="0"} 0.2\nsglang:cache_hit_rate{dp_rank="1"} 0.4\n',
      )?.cacheHitRate,
    ).toBeCloseTo(0.3);
    expect(parseEngineLoad('sglang:num_running_reqs 1\nsglang:cache_hit_rate 3\n')?.cacheHitRate).toBe(1);
  });

  it('is absent where the engine reports none, or only half of the counters', () => {
    expect(parseEngineLoad(fixture('llamacpp.prom'))).not.toHaveProperty('cacheCounters');
    expect(parseEngineLoad(fixture('llamacpp.prom'))).not.toHaveProperty('cacheHitRate');
    // This fixture has the queries counter without the hits one: no rate can be made of it.
    expect(parseEngineLoad(fixture('vllm-v1.prom'))).not.toHaveProperty('cacheCounters');
  });
});
