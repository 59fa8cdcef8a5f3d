// How the builtin engine cuts its context into sequences and sizes its
// queue when the flags leave it to the engine.
import { describe, expect, it } from 'vitest';
import { LlmgwError } from '../../errors/index.js';
import {
  compileBuiltinEngineOptions,
  DEFAULT_QUEUE_PER_SEQUENCE,
  defaultThreads,
  MAX_DEFAULT_THREADS,
  sequenceLayout,
  type BuiltinEngineOptions,
} from './options.js';

// On a one-core machine, so that threads alone decide; the cores case is its own test.
const layout = (options: Omit<BuiltinEngineOptions, 'modelPath'>, trained: number, cores = 1) =>
  sequenceLayout({ ...compileBuiltinEngineOptions({ modelPath: 'm.gguf', ...options }), cores }, trained);

describe('sequenceLayout', () => {
  it('without --parallel gives one sequence per thread, up to 4, each the model context up to 4096', () => {
    expect(layout({ threads: 1 }, 2048)).toEqual({
      parallel: 1,
      perSequence: 2048,
      maxQueue: DEFAULT_QUEUE_PER_SEQUENCE,
    });
    expect(layout({ threads: 3 }, 32768)).toEqual({
      parallel: 3,
      perSequence: 4096,
      maxQueue: 3 * DEFAULT_QUEUE_PER_SEQUENCE,
    });
    expect(layout({ threads: 16 }, 512)).toMatchObject({ parallel: 4, perSequence: 512 });
  });

  it('without --parallel counts the cores too, since the default threads leave one for the engine itself', () => {
    expect(layout({ threads: 1 }, 2048, 2)).toMatchObject({ parallel: 2 });
    expect(layout({ threads: 7 }, 2048, 8)).toMatchObject({ parallel: 4 });
  });

  it('leaves one core to the engine when --threads is absent', () => {
    expect([1, 2, 3, 8, 64].map(defaultThreads)).toEqual([1, 1, 2, 7, MAX_DEFAULT_THREADS]);
  });

  it('without --parallel cuts --ctx-size only into sequences that hold the model context', () => {
    expect(layout({ threads: 8, contextTokens: 8192 }, 4096)).toMatchObject({ parallel: 2, perSequence: 4096 });
    expect(layout({ threads: 8, contextTokens: 1024 }, 4096), 'a small --ctx-size is one whole sequence').toMatchObject(
      { parallel: 1, perSequence: 1024 },
    );
    expect(layout({ threads: 2, contextTokens: 65536 }, 4096), 'threads still cap it').toMatchObject({
      parallel: 2,
      perSequence: 32768,
    });
  });

  it('takes --parallel and --max-queue as given; --max-queue 0 means none wait', () => {
    expect(layout({ threads: 1, parallel: 6, contextTokens: 6000 }, 4096)).toEqual({
      parallel: 6,
      perSequence: 1000,
      maxQueue: 6 * DEFAULT_QUEUE_PER_SEQUENCE,
    });
    expect(layout({ threads: 1, parallel: 2, maxQueue: 0 }, 4096)).toEqual({
      parallel: 2,
      perSequence: 4096,
      maxQueue: 0,
    });
  });

  it('refuses a negative queue and a --ctx-size too small for --parallel, saying what to change', () => {
    expect(() => compileBuiltinEngineOptions({ modelPath: 'm.gguf', maxQueue: -1 })).toThrow(/maxQueue/);
    expect(() => compileBuiltinEngineOptions({ modelPath: 'm.gguf', parallel: 8, contextTokens: 256 })).toThrow(
      LlmgwError,
    );
    expect(() => compileBuiltinEngineOptions({ modelPath: 'm.gguf', parallel: 8, contextTokens: 256 })).toThrow(
      /at least 512 tokens or fewer parallel/,
    );
  });
});
