import { describe, expect, it } from 'vitest';
import type { OverviewData } from '../data.js';
import { renderFragment } from '../layout.js';
import { OverviewPage } from './overview.js';

function overview(nodes: number, models: number, replicas: number): string {
  const data = {
    summary: {
      nodes: { total: nodes, by_state: {}, by_liveness: {} },
      models: { total: models, from_file: models, stored: 0, not_placed: [] },
      replicas: { total: replicas, by_state: {} },
      store: true,
      attention: [],
    },
    nodes: [],
    models: [],
    replicas: [],
  } as unknown as OverviewData;
  return renderFragment(<OverviewPage data={data} />)
    .replace(/<[^>]+>/g, ' ')
    .replace(/\s+/g, ' ');
}

describe('the overview cards', () => {
  // Guards against "1 nodes" (and "1 models", "1 replicas") on the quick start's one-node fleet.
  it('say one in the singular and any other count in the plural', () => {
    expect(overview(1, 1, 1)).toMatch(/ 1 node .* 1 model .* 1 replica /);
    expect(overview(0, 2, 3)).toMatch(/ 0 nodes .* 2 models .* 3 replicas /);
  });
});
