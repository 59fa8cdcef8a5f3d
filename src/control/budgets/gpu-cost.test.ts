// The price derived from GPU-hours: a GPU priced by the wrong key, hours
// counted per replica instead of per GPU, or an interval's cost spread over
// the wrong tokens would misstate what a team spends on a model with no
// token price.
import { describe, expect, it } from 'vitest';
import { gpuHourlyPrice, parseGpuPrices, spreadGpuCost } from './gpu-cost.js';

const H100 = { name: 'NVIDIA H100 80GB HBM3', class: 'h100-80gb' };
const NVL = { name: 'NVIDIA H100 NVL', class: 'h100-94gb' };
const A10 = { name: 'NVIDIA A10G', class: 'a10g-24gb' };

describe('gpuHourlyPrice', () => {
  const prices = new Map([
    ['H100', 2.5],
    ['H100 NVL', 3],
    ['h100-80gb', 2.75],
    ['A100', 1.5],
  ]);
  it.each([
    ['the exact class wins over a name match', H100, 2.75],
    ['the longest key inside the name', NVL, 3],
    ['a key inside the name, case aside', { name: 'nvidia h100 pcie' }, 2.5],
    ['a key inside the class when no name came', { class: 'a100-40gb' }, 1.5],
    ['no key matches', A10, undefined],
    ['nothing reported', {}, undefined],
  ])('%s', (_why, gpu, want) => {
    expect(gpuHourlyPrice(prices, gpu)).toBe(want);
  });
});

describe('spreadGpuCost', () => {
  const prices = new Map([
    ['H100', 2],
    ['A10G', 1],
  ]);
  const hour = 3_600_000;
  const cases: {
    why: string;
    intervalMs: number;
    replicas: { model: string; gpus: { name?: string }[] }[];
    tokens: [string, number][];
    want: [string, { gpuHours: number; costUsd: number; tokens: number; usdPerToken: number | null }][];
  }[] = [
    {
      why: 'an hour of a two-GPU replica over a million tokens: $4 per million',
      intervalMs: hour,
      replicas: [{ model: 'm', gpus: [H100, H100] }],
      tokens: [['m', 1_000_000]],
      want: [['m', { gpuHours: 2, costUsd: 4, tokens: 1_000_000, usdPerToken: 4 / 1_000_000 }]],
    },
    {
      why: "a model's replicas are pooled over its tokens, each GPU at its own class's price",
      intervalMs: hour / 2,
      replicas: [
        { model: 'm', gpus: [H100] },
        { model: 'm', gpus: [A10] },
      ],
      tokens: [['m', 3000]],
      want: [['m', { gpuHours: 1, costUsd: 1.5, tokens: 3000, usdPerToken: 0.0005 }]],
    },
    {
      why: 'an idle interval: the cost is counted, charged to no token',
      intervalMs: hour,
      replicas: [{ model: 'm', gpus: [H100] }],
      tokens: [],
      want: [['m', { gpuHours: 1, costUsd: 2, tokens: 0, usdPerToken: null }]],
    },
    {
      why: 'GPUs of no priced class add hours at no cost',
      intervalMs: hour,
      replicas: [{ model: 'm', gpus: [{ name: 'AMD MI300X' }] }],
      tokens: [['m', 10]],
      want: [['m', { gpuHours: 1, costUsd: 0, tokens: 10, usdPerToken: 0 }]],
    },
    {
      why: 'a CPU replica holds no GPU-hours; its tokens are measured at no cost',
      intervalMs: hour,
      replicas: [{ model: 'cpu', gpus: [] }],
      tokens: [['cpu', 50]],
      want: [['cpu', { gpuHours: 0, costUsd: 0, tokens: 50, usdPerToken: 0 }]],
    },
    {
      why: 'a zero-length interval costs nothing',
      intervalMs: 0,
      replicas: [{ model: 'm', gpus: [H100] }],
      tokens: [['m', 10]],
      want: [['m', { gpuHours: 0, costUsd: 0, tokens: 10, usdPerToken: 0 }]],
    },
  ];
  it.each(cases)('$why', ({ intervalMs, replicas, tokens, want }) => {
    const got = spreadGpuCost({ intervalMs, replicas, prices, tokens: new Map(tokens) });
    expect(
      [...got].map(([m, c]) => [
        m,
        { ...c, usdPerToken: c.usdPerToken === null ? null : +c.usdPerToken.toPrecision(12) },
      ]),
    ).toEqual(
      want.map(([m, c]) => [m, { ...c, usdPerToken: c.usdPerToken === null ? null : +c.usdPerToken.toPrecision(12) }]),
    );
  });
});

describe('parseGpuPrices', () => {
  it.each([
    [
      'a map from the file',
      { H100: 2.5, 'NVIDIA A10G': '1' },
      [
        ['H100', 2.5],
        ['NVIDIA A10G', 1],
      ],
    ],
    [
      'pairs from the environment',
      'H100=2.5, A100=1.25',
      [
        ['H100', 2.5],
        ['A100', 1.25],
      ],
    ],
    [
      'a list from flags',
      ['H100=2', 'L4=0'],
      [
        ['H100', 2],
        ['L4', 0],
      ],
    ],
    ['absent', undefined, []],
  ] as const)('reads %s', (_why, raw, want) => {
    expect([...parseGpuPrices(raw as never)]).toEqual(want);
  });

  it.each([['H100'], ['H100=cheap'], ['H100=-1'], ['=2'], [{ H100: -2 }]])('refuses %j, naming it', (raw) => {
    expect(() => parseGpuPrices(raw as never)).toThrow(/gpu_prices: ".*" is not a GPU class and US dollars per hour/);
  });
});
