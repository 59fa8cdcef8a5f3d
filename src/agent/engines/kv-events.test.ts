// How each adapter turns its engine's KV cache events on, and says where
// they will be: vLLM and SGLang publish over ZeroMQ on the two ports the
// supervisor allocates (--kv-events-config), llama.cpp is polled on /slots,
// a sim with a simulated cache and the builtin engine stream them over HTTP.
import { describe, expect, it } from 'vitest';
import { adapterFor, type ShardLaunch } from './index.js';

const options = { llmgwBin: '/opt/llmgw/bin/llmgw.js', nodePath: '/usr/bin/node', resolveGguf: (p: string) => p };

function launch(engine: string, overrides: Partial<ShardLaunch> = {}, args: string[] = []): ShardLaunch {
  return {
    replicaId: 'rep-1',
    shardId: 'rep-1-s0',
    model: { name: 'm', aliases: [] },
    profile: { name: 'main', engine, gpus: 0, shards: 1, args, env: {} },
    weightsPath: '/w/model.gguf',
    gpuIndices: [],
    host: '0.0.0.0',
    port: 20001,
    rank: 0,
    peers: [],
    ...overrides,
  };
}

const configOf = (argv: readonly string[]) => {
  const i = argv.indexOf('--kv-events-config');
  return i === -1 ? undefined : (JSON.parse(argv[i + 1]!) as Record<string, unknown>);
};

describe('KV cache events per engine', () => {
  it('asks two ports for vLLM and SGLang on rank 0 only, none when the profile configures its own', () => {
    for (const engine of ['vllm', 'sglang']) {
      const adapter = adapterFor(engine, options);
      expect(adapter.kvEventsPorts?.(launch(engine)), engine).toBe(2);
      expect(adapter.kvEventsPorts?.(launch(engine, { rank: 1, peers: [] })), `${engine} rank 1`).toBe(0);
      expect(adapter.kvEventsPorts?.(launch(engine, {}, ['--kv-events-config', '{}'])), `${engine} own`).toBe(0);
    }
  });

  it("turns vLLM's publisher on at the given ports, before the profile's args, and plans where it is", () => {
    const p = adapterFor('vllm', options).plan(
      launch('vllm', { kvEventsPorts: [20002, 20003] }, ['--block-size', '32']),
    );
    expect(configOf(p.argv)).toEqual({
      enable_kv_cache_events: true,
      publisher: 'zmq',
      endpoint: 'tcp://*:20002',
      replay_endpoint: 'tcp://*:20003',
      topic: 'kv-events',
    });
    expect(p.argv.indexOf('--kv-events-config')).toBeLessThan(p.argv.indexOf('--block-size'));
    expect(p.kvEvents).toEqual({ kind: 'zmq', port: 20002, replayPort: 20003, topic: 'kv-events' });
  });

  it("turns SGLang's publisher on with its own fields", () => {
    const p = adapterFor('sglang', options).plan(launch('sglang', { kvEventsPorts: [20002, 20003] }));
    expect(configOf(p.argv)).toEqual({
      publisher: 'zmq',
      endpoint: 'tcp://*:20002',
      replay_endpoint: 'tcp://*:20003',
      topic: 'kv-events',
    });
    expect(p.kvEvents).toMatchObject({ kind: 'zmq', port: 20002 });
  });

  it('changes nothing without ports: the argv is as before and no events are planned', () => {
    for (const engine of ['vllm', 'sglang']) {
      const p = adapterFor(engine, options).plan(launch(engine));
      expect(configOf(p.argv), engine).toBeUndefined();
      expect(p.kvEvents, engine).toBeUndefined();
    }
  });

  it("polls llama.cpp's /slots unless the profile turns them off", () => {
    expect(adapterFor('llamacpp', options).plan(launch('llamacpp')).kvEvents).toEqual({ kind: 'slots', blockSize: 16 });
    expect(adapterFor('llamacpp', options).plan(launch('llamacpp', {}, ['--no-slots'])).kvEvents).toBeUndefined();
  });

  it("reads a sim's stream only when its flags give it a simulated cache", () => {
    const sim = adapterFor('sim', options);
    expect(sim.plan(launch('sim', {}, ['--kv-cache-blocks', '512'])).kvEvents).toEqual({
      kind: 'http',
      path: '/kv-events',
    });
    expect(sim.plan(launch('sim', {}, ['--kv-cache-blocks=0'])).kvEvents).toBeUndefined();
    expect(sim.plan(launch('sim')).kvEvents).toBeUndefined();
  });

  it("reads the builtin engine's stream whatever its flags: its sequences always tell what they hold", () => {
    const builtin = adapterFor('builtin', options);
    expect(builtin.plan(launch('builtin')).kvEvents).toEqual({ kind: 'http', path: '/kv-events' });
    expect(builtin.plan(launch('builtin', {}, ['--parallel', '2'])).kvEvents).toEqual({
      kind: 'http',
      path: '/kv-events',
    });
  });
});
