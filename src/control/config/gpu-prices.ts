// The one key of the price derived from GPU-hours (src/control/budgets/
// gpu-cost.ts): US dollars per GPU-hour per GPU class. Apart from index.ts
// so the feature's key reads with its parser; index.ts spreads it into the
// one schema.
import { z } from 'zod';
import { parseGpuPrices, type GpuPrices } from '../budgets/gpu-cost.js';

export const GPU_PRICES_OPTIONS = {
  /**
   * US dollars per GPU-hour, keyed by the GPU class or a part of the name the
   * agents report: `{H100: 2.5, A10G: 0.75}` in the file, `H100=2.5,A10G=0.75`
   * in the environment. A model with no token price is charged its replicas'
   * GPU-hours over the tokens they serve. Absent = no GPU is priced.
   */
  gpu_prices: z
    .union([z.record(z.string(), z.union([z.number(), z.string()])), z.string(), z.array(z.string())])
    .optional(),
};

/** The compiled prices; a bad entry is pushed onto `problems`, naming it. */
export function compileGpuPrices(
  o: { gpu_prices?: Record<string, number | string> | string | string[] | undefined },
  problems: string[],
): GpuPrices {
  try {
    return parseGpuPrices(o.gpu_prices);
  } catch (err) {
    problems.push((err as Error).message);
    return new Map();
  }
}
