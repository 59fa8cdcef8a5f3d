// Regression: a Responses client that sent `text.format` was told about
// `response_format` in a 400 from the engine, a field it never sent.
import { describe, expect, it } from 'vitest';
import { renameErrorParams, renameParams, type ParamRenames } from './param-names.js';

const RESPONSES: ParamRenames = [
  [/response_format\.json_schema\.schema/, 'text.format.schema'],
  [/response_format/, 'text.format'],
  [/tools\[(\d+)\]\.function\.parameters/, 'tools[$1].parameters'],
];

describe('renameErrorParams', () => {
  it("names the dialect's fields in param and message, keeping indexes, and leaves other bodies alone", () => {
    const body = JSON.stringify({
      error: {
        message:
          'minLength 4 at response_format.json_schema.schema is above its maxLength 2; see tools[3].function.parameters',
        type: 'invalid_request_error',
        param: 'response_format.json_schema.schema.minLength',
        code: null,
      },
    });
    expect(JSON.parse(renameErrorParams(body, RESPONSES))).toEqual({
      error: {
        message: 'minLength 4 at text.format.schema is above its maxLength 2; see tools[3].parameters',
        type: 'invalid_request_error',
        param: 'text.format.schema.minLength',
        code: null,
      },
    });
    expect(renameErrorParams('not json', RESPONSES)).toBe('not json');
    expect(renameErrorParams('{"detail":"x"}', RESPONSES)).toBe('{"detail":"x"}');
  });

  it('renames only whole field paths, not a word that merely ends like one', () => {
    expect(renameParams('my_response_format and response_format', RESPONSES)).toBe(
      'my_response_format and text.format',
    );
  });
});
