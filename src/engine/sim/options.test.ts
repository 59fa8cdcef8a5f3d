import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../errors/index.js';
import { compileSimEngineOptions } from './options.js';

describe('compileSimEngineOptions', () => {
  it('fills the documented defaults', () => {
    const config = compileSimEngineOptions();
    expect(config).toMatchObject({
      host: '127.0.0.1',
      port: 0,
      models: ['sim'],
      ttftMs: 0,
      tokensPerSecond: 0,
      maxConcurrency: 0,
      overflow: 'queue',
      errorRate: 0,
      embeddingDim: 32,
      maxModelLen: 0,
      seed: 0,
      flavor: 'vllm',
    });
    expect(Object.isFrozen(config), 'the compiled form is read-only').toBe(true);
  });

  it('rejects an unknown key naming the nearest valid one', () => {
    const err = (() => {
      try {
        compileSimEngineOptions({ ttftMS: 5 } as never);
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).code).toBe('LLMGW_CONFIG_INVALID');
    expect((err as ValidationError).message).toContain('did you mean "ttftMs"');
  });

  it('lists every problem at once: an error rate over 1, a repeated model, hang with hangAfterRequests', () => {
    const problems = (() => {
      try {
        compileSimEngineOptions({ errorRate: 1.5, models: ['a', 'a'] });
      } catch (e) {
        return (e as ValidationError).problems;
      }
      return [];
    })();
    expect(problems.join('\n')).toContain('errorRate');
    expect(() => compileSimEngineOptions({ models: ['a', 'a'] })).toThrow('"a" is listed twice');
    expect(() => compileSimEngineOptions({ hang: true, hangAfterRequests: 2 })).toThrow('keep one');
  });

  it('keeps the simulated KV cache off by default, and refuses publishing a cache that is off', () => {
    expect(compileSimEngineOptions()).toMatchObject({
      kvCacheBlocks: 0,
      kvBlockSize: 16,
      prefillMsPerToken: 0,
      kvEventsEndpoint: undefined,
    });
    expect(() => compileSimEngineOptions({ kvEventsEndpoint: 'tcp://127.0.0.1:5557' })).toThrow('set kvCacheBlocks');
    expect(() => compileSimEngineOptions({ kvCacheBlocks: 8, kvEventsEndpoint: 'localhost:5557' })).toThrow(
      'want a ZeroMQ address',
    );
    expect(() => compileSimEngineOptions({ kvCacheBlocks: 8, kvEventsReplayEndpoint: 'tcp://127.0.0.1:1' })).toThrow(
      'set kvEventsEndpoint',
    );
  });
});
