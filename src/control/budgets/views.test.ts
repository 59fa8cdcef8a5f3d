// Spend as people read it: a team-admin seeing another team's keys or the
// fleet's GPU-hours would leak what others spend; a model's measured cost
// per million tokens taken from the wrong figures would misstate what the
// fleet's tokens cost.
import { describe, expect, it } from 'vitest';
import { measuredPerMillion, NO_TEAM, spendOf, type UsageCostRow } from './views.js';
import { teamOfIn } from './wire.js';

const row = (key_id: string, model: string, tokens: number, cost_usd: number): UsageCostRow => ({
  key_id,
  model,
  requests: 1,
  prompt_tokens: tokens,
  completion_tokens: 0,
  cost_usd,
});
const rows = [
  row('k_ml', 'byhour', 1000, 2),
  row('k_web', 'byhour', 3000, 6),
  row('k_web', 'priced', 500, 1),
  row('gone', 'priced', 10, 0),
];
const teamOf = (k: string) => ({ k_ml: 'ml', k_web: 'web' })[k];
const priceOf = (m: string) => (m === 'priced' ? { input_per_million: 2000, output_per_million: 0 } : undefined);
const gpu = new Map([
  ['byhour', { gpuHours: 3, costUsd: 12, tokens: 4000 }],
  ['idle', { gpuHours: 1, costUsd: 4, tokens: 0 }],
]);

describe('spendOf', () => {
  it('sums per team, key and model, with GPU-hours and the measured cost per million', () => {
    const s = spendOf(rows, gpu, teamOf, priceOf, null);
    expect(s.teams.map((t) => [t.team, t.cost_usd])).toEqual([
      ['ml', 2],
      ['web', 7],
      [NO_TEAM, 0],
    ]);
    expect(s.keys.find((k) => k.key_id === 'k_web')).toMatchObject({ team: 'web', requests: 2, cost_usd: 7 });
    const byhour = s.models.find((m) => m.model === 'byhour')!;
    expect(byhour).toMatchObject({ price: null, gpu_hours: 3, gpu_cost_usd: 12, measured_usd_per_million: 3000 });
    expect(s.models.find((m) => m.model === 'priced')?.measured_usd_per_million).toBeCloseTo((1 / 510) * 1e6, 6);
    // Held GPUs, served nothing: shown, its cost per token unknown.
    expect(s.models.find((m) => m.model === 'idle')).toMatchObject({
      requests: 0,
      gpu_cost_usd: 4,
      measured_usd_per_million: null,
    });
  });

  it("cuts a team-admin's view to its teams' keys, without the fleet's GPU-hours", () => {
    const s = spendOf(rows, gpu, teamOf, priceOf, ['ml']);
    expect(s.teams.map((t) => t.team)).toEqual(['ml']);
    expect(s.keys.map((k) => k.key_id)).toEqual(['k_ml']);
    expect(s.models).toEqual([
      expect.objectContaining({
        model: 'byhour',
        requests: 1,
        cost_usd: 2,
        gpu_hours: 0,
        measured_usd_per_million: 2000,
      }),
    ]);
  });
});

describe('measuredPerMillion', () => {
  it.each([
    ['GPU cost over metered tokens', { gpuHours: 1, costUsd: 2, tokens: 1_000_000 }, 5, 100, 2],
    ['GPU cost, no token yet', { gpuHours: 1, costUsd: 2, tokens: 0 }, 5, 100, null],
    ['no GPU cost: the usage charge', { gpuHours: 1, costUsd: 0, tokens: 10 }, 500_000, 1, 2],
    ['no GPU totals: the usage charge', undefined, 2_000_000, 1, 0.5],
    ['nothing charged', undefined, 100, 0, null],
  ])('%s', (_why, g, tokens, usd, want) => {
    expect(measuredPerMillion(g, tokens, usd)).toBe(want);
  });
});

describe('teamOfIn', () => {
  it('reads the key list once per turn, and sees a key made since at the next', async () => {
    // Guards the cost of the spend page: every usage row asked for its key's team, and each question sorted a copy of
    // every key and searched it.
    const list: { id: string; team?: string }[] = [{ id: 'k_ml', team: 'ml' }];
    let reads = 0;
    const teamOf = teamOfIn({ list: () => (reads++, list as never) });
    for (let i = 0; i < 1000; i++) expect(teamOf('k_ml')).toBe('ml');
    expect(teamOf('k_new')).toBeUndefined();
    expect(reads).toBe(1);
    list.push({ id: 'k_new', team: 'web' });
    await new Promise((resolve) => setImmediate(resolve));
    expect(teamOf('k_new')).toBe('web');
    expect(reads).toBe(2);
  });
});
