import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { startSimEngine, type SimEngine } from '../../engine/sim/index.js';
import { differs, LoadScraper } from './scraper.js';

const engines: SimEngine[] = [];
const aborts: AbortController[] = [];
afterEach(async () => {
  for (const a of aborts.splice(0)) a.abort();
  await Promise.all(engines.splice(0).map((e) => e.close({ graceMs: 0 })));
});

/** Sends `n` long chat requests and leaves them running (aborted after the test). */
function occupy(engine: SimEngine, n: number): void {
  for (let i = 0; i < n; i++) {
    const abort = new AbortController();
    aborts.push(abort);
    void request(`${engine.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'sim',
        messages: [{ role: 'user', content: 'hi' }],
        max_tokens: 10_000,
        stream: true,
      }),
      signal: abort.signal,
    })
      .then((res) => res.body.dump())
      .catch(() => undefined);
  }
}

async function until(what: string, ok: () => boolean): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('LoadScraper against the sim engine', () => {
  it('reads running, waiting and KV use from a vLLM-flavoured sim, and calls onChange when they move', async () => {
    const engine = await startSimEngine({ maxConcurrency: 2, tokensPerSecond: 5 });
    engines.push(engine);
    let changes = 0;
    let clock = 0;
    const scraper = new LoadScraper({
      targets: () => [{ shardId: 's1', endpoint: engine.url }],
      now: () => clock,
      onChange: () => changes++,
    });
    await scraper.round();
    expect(scraper.take('s1'), 'an idle engine').toEqual({ running: 0, waiting: 0, kv_usage: 0, age_ms: 0 });
    expect(changes, 'the first sample is news').toBe(1);

    occupy(engine, 3);
    await until('the sim runs 2 and queues 1', () => engine.stats().running === 2 && engine.stats().waiting === 1);
    clock = 100;
    await scraper.round();
    expect(changes, 'the counts moved').toBe(2);
    clock = 350;
    expect(scraper.take('s1'), 'two generating, one waiting for a sequence, the cache full').toEqual({
      running: 2,
      waiting: 1,
      kv_usage: 1,
      age_ms: 250,
    });

    clock = 400;
    await scraper.round();
    expect(changes, 'nothing moved and the control plane heard it 50 ms ago').toBe(2);
    await scraper.stop();
  });

  it('reports no KV use for a llama.cpp-flavoured engine, and nothing once the engine stops answering', async () => {
    const engine = await startSimEngine({ flavor: 'llamacpp', maxConcurrency: 1, tokensPerSecond: 5 });
    engines.push(engine);
    let changes = 0;
    const scraper = new LoadScraper({
      targets: () => [{ shardId: 's1', endpoint: engine.url }],
      timeoutMs: 2000,
      onChange: () => changes++,
    });
    occupy(engine, 2);
    await until('the sim runs 1 and queues 1', () => engine.stats().running === 1 && engine.stats().waiting === 1);
    await scraper.round();
    expect(scraper.take('s1')).toMatchObject({ running: 1, waiting: 1 });
    expect(scraper.take('s1'), 'llama.cpp has no KV gauge').not.toHaveProperty('kv_usage');
    for (const a of aborts.splice(0)) a.abort();
    await engines.pop()!.close({ graceMs: 0 });
    await scraper.round();
    expect(scraper.take('s1'), 'a failed read is no sample, not an old one').toBeUndefined();
    expect(changes, 'the load appeared, then went away').toBe(2);
    await scraper.stop();
  });

  it("reads a sim's prefix cache counters as the hit rate of the prompts since the last read", async () => {
    const engine = await startSimEngine({ kvCacheBlocks: 64, tokensPerSecond: 10_000 });
    engines.push(engine);
    const scraper = new LoadScraper({ targets: () => [{ shardId: 's1', endpoint: engine.url }] });
    const ask = async () => {
      const res = await request(`${engine.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'sim',
          messages: [{ role: 'user', content: 'the same long prompt, word after word, '.repeat(20) }],
          max_tokens: 1,
        }),
      });
      await res.body.dump();
    };
    await scraper.round();
    expect(scraper.take('s1'), 'nothing looked up yet').not.toHaveProperty('cache_hit_rate');
    await ask();
    await scraper.round();
    expect(scraper.take('s1')?.cache_hit_rate, 'a first prompt finds nothing cached').toBe(0);
    await ask();
    await scraper.round();
    expect(scraper.take('s1')?.cache_hit_rate, 'the same prompt again: mostly cached').toBeGreaterThan(0.5);
    await scraper.stop();
  });

  it('forgets shards that are no longer targets', async () => {
    let targets = [{ shardId: 's1', endpoint: 'http://127.0.0.1:1' }];
    const scraper = new LoadScraper({ targets: () => targets, fetchText: async () => 'vllm:num_requests_running 3\n' });
    await scraper.round();
    expect(scraper.take('s1')).toMatchObject({ running: 3, waiting: 0 });
    targets = [];
    await scraper.round();
    expect(scraper.take('s1')).toBeUndefined();
  });

  it("sends the prefix cache's hit rate over the last interval that queried anything, and not when unreported", async () => {
    let text = '';
    const vllm = (q: number, h: number) =>
      `vllm:num_requests_running 0\nvllm:prefix_cache_queries_total ${q}\nvllm:prefix_cache_hits_total ${h}\n`;
    let fail = false;
    const scraper = new LoadScraper({
      targets: () => [{ shardId: 's1', endpoint: 'http://127.0.0.1:1' }],
      fetchText: async () => {
        if (fail) throw new Error('refused');
        return text;
      },
    });
    text = vllm(0, 0);
    await scraper.round();
    expect(scraper.take('s1'), 'nothing looked up yet: absent, not 0').not.toHaveProperty('cache_hit_rate');
    text = vllm(1000, 100);
    await scraper.round();
    expect(scraper.take('s1')).toMatchObject({ cache_hit_rate: 0.1 });
    text = vllm(2000, 1000);
    await scraper.round();
    expect(scraper.take('s1'), '900 of the last 1000, not 1000 of 2000').toMatchObject({ cache_hit_rate: 0.9 });
    await scraper.round();
    expect(scraper.take('s1'), 'an idle interval keeps the last rate').toMatchObject({ cache_hit_rate: 0.9 });
    fail = true;
    await scraper.round();
    fail = false;
    text = vllm(3000, 1500);
    await scraper.round();
    expect(scraper.take('s1'), 'a failed read in between: measured from the last good one').toMatchObject({
      cache_hit_rate: 0.5,
    });
    text = 'sglang:num_running_reqs 1\nsglang:cache_hit_rate 0.4\n';
    await scraper.round();
    expect(scraper.take('s1'), "SGLang's gauge as it is").toMatchObject({ cache_hit_rate: 0.4 });
    text = 'llamacpp:requests_processing 1\n';
    await scraper.round();
    expect(scraper.take('s1'), 'llama.cpp reports none').not.toHaveProperty('cache_hit_rate');
  });
});

describe('differs', () => {
  const idle = { running: 0, waiting: 0 };
  it.each([
    ['a first sample', undefined, idle, 0, true],
    ['no sample, never sent', undefined, null, 0, false],
    ['a sample that went away', idle, null, 0, true],
    ['the same idle sample, long after', idle, idle, 60_000, false],
    ['a count moved', idle, { running: 1, waiting: 0 }, 0, true],
    [
      'KV moved a little',
      { running: 1, waiting: 0, kvUsage: 0.5 },
      { running: 1, waiting: 0, kvUsage: 0.52 },
      0,
      false,
    ],
    [
      'KV moved a twentieth',
      { running: 1, waiting: 0, kvUsage: 0.5 },
      { running: 1, waiting: 0, kvUsage: 0.55 },
      0,
      true,
    ],
    [
      'KV crossed the pressure line',
      { running: 1, waiting: 0, kvUsage: 0.89 },
      { running: 1, waiting: 0, kvUsage: 0.91 },
      0,
      true,
    ],
    ['busy and unchanged, heard one interval ago', { running: 2, waiting: 1 }, { running: 2, waiting: 1 }, 1000, false],
    ['busy and unchanged, heard two intervals ago', { running: 2, waiting: 1 }, { running: 2, waiting: 1 }, 2000, true],
  ] as const)('%s', (_name, sent, now, sinceMs, want) => {
    expect(differs(sent, now, sinceMs, 1000)).toBe(want);
  });
});
