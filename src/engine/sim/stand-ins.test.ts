import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { planStandIn } from './stand-ins.js';

describe('planStandIn reads what it needs from each real engine command line', () => {
  it('vllm serve: served names, host, port, context; the model path when no names are given', () => {
    expect(
      planStandIn('vllm', [
        'serve',
        '/m/llama',
        '--served-model-name',
        'a',
        'b',
        '--host',
        '127.0.0.2',
        '--port',
        '9000',
        '--max-model-len=8k',
      ]),
    ).toMatchObject({
      kind: 'serve',
      options: { host: '127.0.0.2', port: 9000, models: ['a', 'b'], maxModelLen: 8000, flavor: 'vllm' },
    });
    expect(planStandIn('vllm', ['serve', '--model', '/m/llama'])).toMatchObject({
      kind: 'serve',
      options: { models: ['/m/llama'], port: 8000, host: '127.0.0.1' },
    });
    expect(planStandIn('vllm', ['serve', '/m/llama', '--headless'])).toMatchObject({ kind: 'headless' });
    expect(planStandIn('vllm', ['bench'])).toMatchObject({ kind: 'exit', code: 2 });
    expect(planStandIn('vllm', ['serve', '/m', '--port', 'x'])).toMatchObject({
      kind: 'exit',
      code: 2,
      message: expect.stringContaining('--port'),
    });
  });

  it('vllm and sglang: --kv-events-config as the agent writes it publishes the sim cache over ZeroMQ', () => {
    const config = JSON.stringify({
      enable_kv_cache_events: true,
      publisher: 'zmq',
      endpoint: 'tcp://*:20002',
      replay_endpoint: 'tcp://*:20003',
      topic: 'kv-events',
    });
    expect(planStandIn('vllm', ['serve', '/m', '--kv-events-config', config, '--block-size', '32'])).toMatchObject({
      options: {
        kvEventsEndpoint: 'tcp://*:20002',
        kvEventsReplayEndpoint: 'tcp://*:20003',
        kvEventsTopic: 'kv-events',
        kvBlockSize: 32,
      },
    });
    expect(
      planStandIn('python3', ['-m', 'sglang.launch_server', '--model-path', '/m', '--kv-events-config', config]),
    ).toMatchObject({ options: { flavor: 'sglang', kvEventsEndpoint: 'tcp://*:20002' } });
    expect(planStandIn('vllm', ['serve', '/m', '--kv-events-config', '{"publisher":"null"}'])).not.toMatchObject({
      options: { kvEventsEndpoint: expect.anything() },
    });
    expect(planStandIn('vllm', ['serve', '/m', '--kv-events-config', '{'])).toMatchObject({ kind: 'exit', code: 2 });
  });

  it('llama-server: comma-separated aliases, -c as the context, port 8080 by default', () => {
    expect(planStandIn('llama-server', ['-m', '/m/q.gguf', '-a', 'q, q2', '-c', '4096'])).toMatchObject({
      kind: 'serve',
      options: { models: ['q', 'q2'], maxModelLen: 4096, port: 8080, flavor: 'llamacpp' },
    });
    expect(planStandIn('llama-server', ['--port', '1'])).toMatchObject({ kind: 'exit', code: 2 });
  });

  it('takes the API key from --api-key, or from the variable the real engine reads in its place', () => {
    expect(planStandIn('vllm', ['serve', '/m'], { VLLM_API_KEY: 'k-env' })).toMatchObject({
      options: { apiKey: 'k-env' },
    });
    expect(
      planStandIn('vllm', ['serve', '/m', '--api-key', 'k-flag'], { VLLM_API_KEY: 'k-env' }),
      'the flag wins, as in vLLM',
    ).toMatchObject({ options: { apiKey: 'k-flag' } });
    expect(planStandIn('llama-server', ['-m', '/m/q.gguf'], { LLAMA_API_KEY: 'k-env' })).toMatchObject({
      options: { apiKey: 'k-env' },
    });
    expect(
      planStandIn('python3', ['-m', 'sglang.launch_server', '--model-path', '/m', '--api-key=-k-dash']),
    ).toMatchObject({ options: { apiKey: '-k-dash' } });
    expect(
      planStandIn('python3', ['-m', 'sglang.launch_server', '--model-path', '/m'], {
        VLLM_API_KEY: 'k',
        LLAMA_API_KEY: 'k',
      }),
      'SGLang reads no variable',
    ).not.toHaveProperty('options.apiKey');
  });

  it("takes SGLang's key from its --config file, as the agent now gives it, with the command line's --api-key winning", () => {
    // The agent gave SGLang its key as --api-key=SECRET, which every user of the node read in ps (issue 33); the stand-in must read where it goes now.
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-standin-config-'));
    const config = join(dir, 's0.sglang.yaml');
    writeFileSync(config, 'api-key: "k-file"\n', { mode: 0o600 });
    const sglang = (...args: string[]) =>
      planStandIn('python3', ['-m', 'sglang.launch_server', '--model-path', '/m', ...args]);
    expect(sglang('--config', config)).toMatchObject({ kind: 'serve', options: { apiKey: 'k-file' } });
    expect(sglang('--config', config, '--api-key', 'k-flag')).toMatchObject({ options: { apiKey: 'k-flag' } });
    writeFileSync(join(dir, 'plain.yaml'), 'port: 1\n');
    expect(
      sglang('--config', join(dir, 'plain.yaml')),
      'a file with no key leaves the stand-in open, as SGLang',
    ).not.toHaveProperty('options.apiKey');
    expect(sglang('--config', join(dir, 'none.yaml')), 'an unreadable file stops it, as SGLang').toMatchObject({
      kind: 'exit',
      code: 2,
    });
    expect(sglang('--config', join(dir, 'x.json')), 'SGLang takes only YAML').toMatchObject({ kind: 'exit', code: 2 });
  });

  it('rpc-server listens on TCP, 127.0.0.1:50052 by default', () => {
    expect(planStandIn('rpc-server', [])).toMatchObject({ kind: 'tcp', host: '127.0.0.1', port: 50052 });
    expect(planStandIn('rpc-server', ['-H', '10.0.0.1', '-p', '6000'])).toMatchObject({
      kind: 'tcp',
      host: '10.0.0.1',
      port: 6000,
    });
  });

  it('python: sglang (rank 0 serves, rank ≥ 1 only health), the vLLM module, nothing else', () => {
    expect(
      planStandIn('python3', ['-m', 'sglang.launch_server', '--model-path', '/m/q', '--context-length', '2048']),
    ).toMatchObject({
      kind: 'serve',
      options: { models: ['/m/q'], port: 30000, maxModelLen: 2048, flavor: 'sglang' },
    });
    expect(
      planStandIn('python', [
        '-m',
        'sglang.launch_server',
        '--model-path',
        '/m/q',
        '--node-rank',
        '1',
        '--port',
        '31000',
      ]),
    ).toMatchObject({
      kind: 'health-only',
      port: 31000,
    });
    expect(planStandIn('python', ['-m', 'vllm.entrypoints.openai.api_server', '--model', '/m/q'])).toMatchObject({
      kind: 'serve',
    });
    expect(planStandIn('python', ['-c', 'print(1)'])).toMatchObject({ kind: 'exit', code: 1 });
  });

  it('takes --api-key from each engine, so a stand-in refuses what the real engine would', () => {
    expect(planStandIn('vllm', ['serve', '/m', '--api-key', 'k1'])).toMatchObject({
      kind: 'serve',
      options: { apiKey: 'k1' },
    });
    expect(planStandIn('llama-server', ['-m', '/m/q.gguf', '--api-key', 'k2,k3'])).toMatchObject({
      kind: 'serve',
      options: { apiKey: 'k2' },
    });
    expect(
      planStandIn('python3', ['-m', 'sglang.launch_server', '--model-path', '/m/q', '--api-key=k4']),
    ).toMatchObject({ kind: 'serve', options: { apiKey: 'k4' } });
    expect(planStandIn('vllm', ['serve', '/m'])).not.toHaveProperty('options.apiKey');
  });

  it("takes each engine's TLS flags, so a stand-in serves https where the real engine would", () => {
    expect(
      planStandIn('vllm', ['serve', '/m', '--ssl-certfile', '/p/c.pem', '--ssl-keyfile', '/p/k.pem']),
    ).toMatchObject({
      kind: 'serve',
      options: { tlsCert: '/p/c.pem', tlsKey: '/p/k.pem' },
      readyLine: expect.stringContaining('on https://'),
    });
    expect(
      planStandIn('llama-server', ['-m', '/m/q.gguf', '--ssl-cert-file', '/p/c.pem', '--ssl-key-file', '/p/k.pem']),
    ).toMatchObject({
      kind: 'serve',
      options: { tlsCert: '/p/c.pem', tlsKey: '/p/k.pem' },
      readyLine: expect.stringContaining('listening on https://'),
    });
    expect(
      planStandIn('python3', [
        '-m',
        'sglang.launch_server',
        '--model-path',
        '/m/q',
        '--ssl-certfile=/p/c.pem',
        '--ssl-keyfile=/p/k.pem',
      ]),
    ).toMatchObject({
      kind: 'serve',
      options: { tlsCert: '/p/c.pem', tlsKey: '/p/k.pem' },
    });
    expect(planStandIn('vllm', ['serve', '/m'])).not.toHaveProperty('options.tlsCert');
  });
});
