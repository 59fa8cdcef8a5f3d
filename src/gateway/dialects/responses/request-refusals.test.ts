// The Responses request's refusals: each names the field at fault.
import { describe, expect, it } from 'vitest';
import { isLlmgwError } from '../../../errors/index.js';
import { parseRequest, toChat } from './request.js';

const base = { model: 'm' };

describe('parseRequest refusals', () => {
  const refusals: Array<[string, unknown, string, RegExp]> = [
    ['a body that is not an object', [1], 'body', /JSON object/],
    ['no model', { input: 'x' }, 'model', /model/],
    ['no input and no previous response', { ...base }, 'input', /input: is required/],
    ['input of the wrong type', { ...base, input: 5 }, 'input', /string or a list of input items/],
    [
      'max_output_tokens 0',
      { ...base, input: 'x', max_output_tokens: 0 },
      'max_output_tokens',
      /max_output_tokens: want at least 1/,
    ],
    ['temperature above 2', { ...base, input: 'x', temperature: 3 }, 'temperature', /temperature: want 0 to 2/],
    ['background mode', { ...base, input: 'x', background: true }, 'background', /background mode is not supported/],
    ['a conversation', { ...base, input: 'x', conversation: 'conv_1' }, 'conversation', /previous_response_id instead/],
    ['a stored prompt', { ...base, input: 'x', prompt: { id: 'pmpt_1' } }, 'prompt', /stored prompt templates/],
    ['truncation auto', { ...base, input: 'x', truncation: 'auto' }, 'truncation', /"auto" is not supported/],
    [
      'an include of a built-in tool',
      { ...base, input: 'x', include: ['file_search_call.results'] },
      'include',
      /"file_search_call.results" is not supported/,
    ],
    [
      'web search',
      { ...base, input: 'x', tools: [{ type: 'web_search' }] },
      'tools',
      /tools\[0\]\.type: "web_search" is a tool OpenAI runs.*only function tools/,
    ],
    [
      'web search preview',
      { ...base, input: 'x', tools: [{ type: 'web_search_preview' }] },
      'tools',
      /"web_search_preview"/,
    ],
    [
      'file search',
      {
        ...base,
        input: 'x',
        tools: [
          { type: 'function', name: 'f' },
          { type: 'file_search', vector_store_ids: [] },
        ],
      },
      'tools',
      /tools\[1\]\.type: "file_search"/,
    ],
    [
      'code interpreter',
      { ...base, input: 'x', tools: [{ type: 'code_interpreter', container: { type: 'auto' } }] },
      'tools',
      /"code_interpreter"/,
    ],
    [
      'computer use',
      { ...base, input: 'x', tools: [{ type: 'computer_use_preview' }] },
      'tools',
      /"computer_use_preview"/,
    ],
    ['image generation', { ...base, input: 'x', tools: [{ type: 'image_generation' }] }, 'tools', /"image_generation"/],
    ['mcp', { ...base, input: 'x', tools: [{ type: 'mcp', server_label: 's' }] }, 'tools', /"mcp"/],
    ['local shell', { ...base, input: 'x', tools: [{ type: 'local_shell' }] }, 'tools', /"local_shell"/],
    ['a custom tool', { ...base, input: 'x', tools: [{ type: 'custom', name: 'c' }] }, 'tools', /"custom"/],
    [
      'a function tool without a name',
      { ...base, input: 'x', tools: [{ type: 'function', parameters: {} }] },
      'tools',
      /tools\[0\]\.name/,
    ],
    [
      'a hosted tool_choice',
      { ...base, input: 'x', tool_choice: { type: 'web_search_preview' } },
      'tool_choice',
      /"web_search_preview".*not supported/,
    ],
    [
      'an unknown tool_choice',
      { ...base, input: 'x', tool_choice: 'any' },
      'tool_choice',
      /"auto", "none", "required"/,
    ],
    [
      'a json_schema without a schema',
      { ...base, input: 'x', text: { format: { type: 'json_schema', name: 'n' } } },
      'text',
      /text\.format\.schema/,
    ],
    [
      'an image by file id',
      { ...base, input: [{ role: 'user', content: [{ type: 'input_image', file_id: 'file_1', detail: 'auto' }] }] },
      'input',
      /input\[0\]\.content\[0\]\.file_id: files are not supported/,
    ],
    [
      'a file',
      { ...base, input: [{ role: 'user', content: [{ type: 'input_file', file_data: 'x' }] }] },
      'input',
      /files are not supported/,
    ],
    [
      'an image in a system message',
      { ...base, input: [{ role: 'system', content: [{ type: 'input_image', image_url: 'https://x/a.png' }] }] },
      'input',
      /only in a user message/,
    ],
    ['an unknown role', { ...base, input: [{ role: 'tool', content: 'x' }] }, 'input', /input\[0\]\.role/],
    [
      'a web search call item',
      { ...base, input: [{ type: 'web_search_call', id: 'ws_1' }] },
      'input',
      /"web_search_call" item is not supported/,
    ],
    [
      'a function_call without call_id',
      { ...base, input: [{ type: 'function_call', name: 'f', arguments: '{}' }] },
      'input',
      /input\[0\]\.call_id/,
    ],
    [
      'function arguments not a string',
      { ...base, input: [{ type: 'function_call', call_id: 'c', name: 'f', arguments: {} }] },
      'input',
      /arguments as a JSON string/,
    ],
    [
      'an image in a function output',
      {
        ...base,
        input: [{ type: 'function_call_output', call_id: 'c', output: [{ type: 'input_image', image_url: 'u' }] }],
      },
      'input',
      /only input_text parts/,
    ],
    [
      'input that is only instructions',
      { ...base, input: [{ role: 'system', content: 'x' }] },
      'input',
      /no message to answer/,
    ],
  ];
  it.each(refusals)('refuses %s, naming the field', (_name, body, param, message) => {
    let caught: unknown;
    try {
      const request = parseRequest(body);
      toChat(request);
    } catch (err) {
      caught = err;
    }
    expect(isLlmgwError(caught), 'an LlmgwError').toBe(true);
    if (!isLlmgwError(caught)) return;
    expect(caught.code).toBe('LLMGW_BAD_REQUEST');
    expect(caught.status).toBe(400);
    expect(caught.context.param).toBe(param);
    expect(caught.message).toMatch(message);
  });
});
