// gpu_prices as an operator writes it: a map in the file, pairs in the
// environment. Guards against a price that is read wrongly (or dropped)
// silently charging a model's tokens nothing, and a bad entry starting the
// control plane instead of naming itself.
import { describe, expect, it } from 'vitest';
import { compileControlOptions, loadControlConfig } from './index.js';

describe('gpu_prices', () => {
  it('is empty when absent', () => {
    expect(loadControlConfig({ env: {} }).gpuPrices.size).toBe(0);
  });

  it('is read from the file as a map, and from the environment or a flag as pairs', () => {
    expect([...compileControlOptions({ gpu_prices: { H100: 2.5, A10G: '0.75' } }).gpuPrices]).toEqual([
      ['H100', 2.5],
      ['A10G', 0.75],
    ]);
    expect([...loadControlConfig({ env: { LLMGW_GPU_PRICES: 'H100=3,L4=0.5' } }).gpuPrices]).toEqual([
      ['H100', 3],
      ['L4', 0.5],
    ]);
    expect([...loadControlConfig({ env: {}, flags: { gpu_prices: 'h100-80gb=2' } }).gpuPrices]).toEqual([
      ['h100-80gb', 2],
    ]);
  });

  it.each([['H100'], ['H100=free'], [{ H100: -1 }]])('refuses %j, naming the key and the entry', (value) => {
    expect(() => compileControlOptions({ gpu_prices: value })).toThrow(/gpu_prices: "H100.*" is not a GPU class/);
  });
});
