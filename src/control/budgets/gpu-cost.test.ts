// The price derived from GPU-hours: a GPU priced by the wrong key, hours
// counted per replica instead of per GPU, or an interval's cost spread over
// the wrong tokens would misstate what a team spends on a model with no
// token price.
import { describe, expect, it } from 'vitest';
import { gpuHourlyPrice, parseGpuPrices, rateOf, spreadByReplica, spreadGpuCost } from './gpu-cost.js';

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

describe('spreadByReplica', () => {
  const prices = new Map([
    ['H100', 4],
    ['A10G', 1],
  ]);
  const hour = 3_600_000;
  const cases: {
    why: string;
    replicas: { id?: string; model: string; gpus: { name?: string }[] }[];
    served: { model: string; replicaId?: string; tokens: number }[];
    /** [model, replica id or undefined, US dollars per token or null] */
    want: [string, string | undefined, number | null][];
    /** [model, cost over the hour, tokens] */
    totals: [string, number, number][];
  }[] = [
    {
      why: 'an H100 replica and an A10 replica of one model price their own tokens',
      replicas: [
        { id: 'r-h100', model: 'm', gpus: [H100] },
        { id: 'r-a10', model: 'm', gpus: [A10] },
      ],
      served: [
        { model: 'm', replicaId: 'r-h100', tokens: 1000 },
        { model: 'm', replicaId: 'r-a10', tokens: 1000 },
      ],
      want: [
        ['m', 'r-h100', 0.004],
        ['m', 'r-a10', 0.001],
      ],
      totals: [['m', 5, 2000]],
    },
    {
      why: "an idle replica's cost is charged to no named token: kept in the totals, as for an idle model",
      replicas: [
        { id: 'busy', model: 'm', gpus: [A10] },
        { id: 'idle', model: 'm', gpus: [H100] },
      ],
      served: [{ model: 'm', replicaId: 'busy', tokens: 100 }],
      want: [
        ['m', 'busy', 0.01],
        ['m', 'idle', null],
        ['m', undefined, null],
      ],
      totals: [['m', 5, 100]],
    },
    {
      why: "tokens that name no held replica share the model's idle replicas' cost (today's pooled rule)",
      replicas: [
        { id: 'busy', model: 'm', gpus: [A10] },
        { id: 'idle', model: 'm', gpus: [H100] },
      ],
      served: [
        { model: 'm', replicaId: 'busy', tokens: 100 },
        { model: 'm', tokens: 400 },
        { model: 'm', replicaId: 'released-before-the-interval-closed', tokens: 400 },
      ],
      want: [
        ['m', 'busy', 0.01],
        ['m', undefined, 4 / 800],
        ['m', 'released-before-the-interval-closed', 4 / 800],
      ],
      totals: [['m', 5, 900]],
    },
    {
      why: 'no replica named at all: every token at the model pooled over its replicas',
      replicas: [
        { id: 'a', model: 'm', gpus: [H100] },
        { id: 'b', model: 'm', gpus: [A10] },
      ],
      served: [{ model: 'm', tokens: 1000 }],
      want: [['m', 'a', 0.005]],
      totals: [['m', 5, 1000]],
    },
    {
      why: "a replica id named under another model is not that model's replica",
      replicas: [{ id: 'x', model: 'other', gpus: [H100] }],
      served: [{ model: 'm', replicaId: 'x', tokens: 10 }],
      want: [
        ['m', 'x', 0],
        ['other', undefined, null],
      ],
      totals: [
        ['m', 0, 10],
        ['other', 4, 0],
      ],
    },
  ];
  it.each(cases)('$why', ({ replicas, served, want, totals }) => {
    const got = spreadByReplica({ intervalMs: hour, replicas, prices, served });
    const round = (n: number | null) => (n === null ? null : +n.toPrecision(12));
    expect(want.map(([m, r]) => [m, r, round(rateOf(got, m, r))])).toEqual(want.map(([m, r, w]) => [m, r, round(w)]));
    expect(
      [...got.models]
        .map(([m, c]) => [m, round(c.costUsd), c.tokens])
        .sort((a, b) => String(a[0]).localeCompare(String(b[0]))),
    ).toEqual(totals);
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
