// The probe's request headers per API: an Anthropic remote refuses a bearer
// token and a request without anthropic-version, so a probe sent like an
// OpenAI one would take a healthy Anthropic endpoint out of routing.
import { describe, expect, it } from 'vitest';
import { probeHeaders, probePath } from './probe.js';

describe('a remote probe', () => {
  it.each([
    ['chat', { accept: 'application/json', authorization: 'Bearer k' }],
    ['llmgw', { accept: 'application/json', authorization: 'Bearer k' }],
    ['responses', { accept: 'application/json', authorization: 'Bearer k' }],
    ['anthropic', { accept: 'application/json', 'anthropic-version': '2023-06-01', 'x-api-key': 'k' }],
  ] as const)('sends %s its key where that API takes it', (api, headers) => {
    expect(probeHeaders(api, 'k')).toEqual(headers);
  });

  it('sends no key header when the remote has no key', () => {
    expect(probeHeaders('anthropic', undefined)).toEqual({
      accept: 'application/json',
      'anthropic-version': '2023-06-01',
    });
    expect(probeHeaders('chat', undefined)).toEqual({ accept: 'application/json' });
  });

  it('lists models at /v1/models for every API but a peer llmgw', () => {
    expect(['chat', 'responses', 'anthropic', 'llmgw'].map((a) => probePath(a as 'chat'))).toEqual([
      '/v1/models',
      '/v1/models',
      '/v1/models',
      '/v1/llmgw/capacity',
    ]);
  });
});
