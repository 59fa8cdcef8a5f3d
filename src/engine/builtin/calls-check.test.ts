// Calls the model makes under tool_choice auto are written under
// node-llama-cpp's grammar, which bounds no numbers and holds no ranges,
// patterns or most formats: a call could carry 9e63764 (read as Infinity)
// or break the schema its client validates against. callsPlan checks each
// call against its tool's whole schema so the engine writes it again.
import { describe, expect, it } from 'vitest';
import { callsPlan } from './llama-runtime.js';

const weather = {
  name: 'get_weather',
  description: undefined,
  param: 'tools[1].function.parameters',
  parameters: {
    type: 'object',
    properties: { city: { type: 'string', pattern: '^[A-Z]' }, days: { type: 'integer', minimum: 1, maximum: 7 } },
    required: ['city', 'days'],
  },
};

describe('callsPlan', () => {
  it("checks each call's arguments against its own tool's schema, naming the field", () => {
    const plan = callsPlan([weather]);
    const check = (params: unknown) =>
      plan.check!({ response: '', functionCalls: [{ functionName: 'get_weather', params }] });
    expect(check({ city: 'Oslo', days: 3 })).toBeNull();
    expect(check({ city: 'Oslo', days: Infinity })).toMatch(
      /^get_weather's arguments break tools\[1\]\.function\.parameters: \/days must be integer/,
    );
    expect(check({ city: 'oslo', days: 3 })).toMatch(/\/city must match pattern/);
    expect(check({ city: 'Oslo', days: 9 })).toMatch(/\/days must be <= 7/);
    expect(plan.check!({ response: 'no call at all' }), 'text alone has nothing to check').toBeNull();
    expect(plan.invalid('x')).toMatch(/force the call/);
  });
});
