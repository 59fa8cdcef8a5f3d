import { describe, expect, it } from 'vitest';
import { classMemoryMiB, gpuClass, gpuFamily, marketingSizeGB } from './gpu-class.js';

describe('gpuClass', () => {
  // Names and totals as nvidia-smi prints them in the captures under fixtures/ and the shared collection.
  const cases: [name: string, memoryMiB: number, expected: string][] = [
    ['NVIDIA H100 80GB HBM3', 81559, 'h100-80gb'],
    ['NVIDIA H200', 143771, 'h200-141gb'],
    ['NVIDIA L40S', 46068, 'l40s-48gb'],
    ['NVIDIA A100-SXM4-80GB', 81920, 'a100-80gb'],
    ['NVIDIA A10G', 23028, 'a10g-24gb'],
    ['NVIDIA A10', 23028, 'a10-24gb'],
    ['NVIDIA GeForce RTX 4090', 24564, 'rtx4090-24gb'],
    ['NVIDIA GeForce RTX 4080 SUPER', 16376, 'rtx4080super-16gb'],
    ['Tesla P100-PCIE-16GB', 16280, 'p100-16gb'],
    ['Tesla T4', 15360, 't4-16gb'],
    ['NVIDIA H100 PCIe', 81559, 'h100-80gb'],
    ['NVIDIA H100 NVL', 95830, 'h100-94gb'],
    ['NVIDIA GH200 480GB', 97871, 'gh200-96gb'],
    ['NVIDIA B200', 183359, 'b200-180gb'],
    ['NVIDIA RTX 6000 Ada Generation', 49140, 'rtx6000ada-48gb'],
    ['NVIDIA A100-PCIE-40GB', 40536, 'a100-40gb'],
  ];
  for (const [name, memoryMiB, expected] of cases) {
    it(`names "${name}" with ${memoryMiB} MiB ${expected}`, () => {
      expect(gpuClass(name, memoryMiB)).toBe(expected);
    });
  }

  it('is unknown (null) without a name, without memory, or with a name of brand words only', () => {
    expect(gpuClass(undefined, 81559)).toBeNull();
    expect(gpuClass('NVIDIA H100 80GB HBM3', undefined)).toBeNull();
    expect(gpuClass('NVIDIA H100 80GB HBM3', 0)).toBeNull();
    expect(gpuClass('NVIDIA', 81559)).toBeNull();
  });

  it('keeps the family when form-factor words come first in a dashed name', () => {
    expect(gpuFamily('Tesla V100-SXM2-32GB')).toBe('v100');
  });

  it('rounds sizes above every label to the nearest GB', () => {
    expect(marketingSizeGB(400 * 1024)).toBe(400);
  });

  it('gives simulated classes the memory real cards report, and label GiB for others', () => {
    expect(classMemoryMiB('h100-80gb')).toBe(81559);
    expect(classMemoryMiB('x9-12gb')).toBe(12 * 1024);
    expect(classMemoryMiB('not a class')).toBeNull();
    // A simulated card must classify back to its own class, or placement would see two names for one card.
    for (const cls of [
      'h100-80gb',
      'h200-141gb',
      'l40s-48gb',
      'a10g-24gb',
      'rtx4090-24gb',
      'p100-16gb',
      'b200-180gb',
    ]) {
      expect(marketingSizeGB(classMemoryMiB(cls)!), cls).toBe(Number(/-(\d+)gb$/.exec(cls)![1]));
    }
  });
});
