import { describe, expect, it } from 'vitest';
import { ModelFileError, parseModels } from './model-file.js';

const one = { name: 'm', source: 'hf://o/m', profiles: [{ engine: 'sim' }] };

describe('model files', () => {
  it('reads one model, a list, or {models: [...]}, in YAML or JSON', () => {
    expect(parseModels('name: m\nsource: hf://o/m\nprofiles:\n  - engine: sim\n', 'f')).toEqual([one]);
    expect(parseModels(JSON.stringify([one, { ...one, name: 'n' }]), 'f').map((m) => m.name)).toEqual(['m', 'n']);
    expect(parseModels(JSON.stringify({ models: [one] }), 'f')).toEqual([one]);
  });

  it('names every problem at once, with where it is', () => {
    const err = (() => {
      try {
        parseModels(JSON.stringify({ models: [{ name: 'a', profiles: [] }, one, one] }), 'models.yaml');
      } catch (e) {
        return e as ModelFileError;
      }
      throw new Error('expected a ModelFileError');
    })();
    expect(err).toBeInstanceOf(ModelFileError);
    expect(err.problems).toEqual([
      'models[0].source: want a string such as hf://org/repo or file:///path',
      'models[0].profiles: want a list with at least one profile',
      'models[2].name: "m" is defined twice in this file',
    ]);
    expect(() => parseModels('{ nope', 'f')).toThrow(/not valid YAML or JSON/);
    expect(() => parseModels('[]', 'f')).toThrow(/holds no model/);
  });
});
