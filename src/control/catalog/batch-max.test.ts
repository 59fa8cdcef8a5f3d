// scaling.batch_max_replicas as the catalog takes it: compiled where the
// scaler reads it, absent when not written (what already runs), and refused
// above scaling.max with words that say which to change.
import { describe, expect, it } from 'vitest';
import { compileModel, definitionProblems, ModelSchema } from './model.js';

const parse = (scaling: Record<string, unknown>) =>
  ModelSchema.parse({ name: 'm', source: 'hf://Qwen/Qwen2.5-0.5B-Instruct', profiles: [{ engine: 'sim' }], scaling });

describe('scaling.batch_max_replicas', () => {
  it('is absent from the compiled policy when not written: batch lines never start a replica', () => {
    expect(compileModel(parse({ min: 1, max: 3 }), 'file').scaling).not.toHaveProperty('batchMaxReplicas');
  });

  it('compiles to batchMaxReplicas', () => {
    expect(compileModel(parse({ min: 0, max: 4, batch_max_replicas: 2 }), 'file').scaling.batchMaxReplicas).toBe(2);
  });

  it('is refused above scaling.max, naming both', () => {
    expect(definitionProblems(parse({ min: 1, max: 2, batch_max_replicas: 3 }))).toContain(
      'scaling: batch_max_replicas (3) is greater than max (2); raise scaling.max or lower batch_max_replicas',
    );
    expect(definitionProblems(parse({ min: 1, max: 2, batch_max_replicas: 2 }))).toEqual([]);
  });
});
