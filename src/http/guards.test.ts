import type { FastifyRequest } from 'fastify';
import { describe, expect, it } from 'vitest';
import { checkHost, crossSiteProblem, hostAllowlist, hostNameOf, isJsonContentType } from './guards.js';

const request = (headers: Record<string, string>) => ({ headers }) as unknown as FastifyRequest;

describe('host allowlist', () => {
  it('reads a Host header as its name alone, and nothing that is not a name', () => {
    expect(hostNameOf('127.0.0.1:8081')).toBe('127.0.0.1');
    expect(hostNameOf('[::1]:8081')).toBe('::1');
    expect(hostNameOf('Gateway.Example.com.')).toBe('gateway.example.com');
    expect(hostNameOf('evil.example@127.0.0.1')).toBeNull();
    expect(hostNameOf('a b')).toBeNull();
    expect(hostNameOf(undefined)).toBeNull();
  });

  it('lets in the bound address, loopback names and configured names, and says which key adds more', () => {
    const allowed = hostAllowlist({ boundHost: '127.0.0.1', extra: ['gw.example.com'], credentialsRequired: false });
    for (const host of ['127.0.0.1:1', 'localhost', '[::1]:2', 'gw.example.com:443', '127.0.0.2']) {
      expect(() => checkHost(request({ host }), allowed, 'admin', 'admin_hosts'), host).not.toThrow();
    }
    expect(() => checkHost(request({ host: 'rebound.evil.example:8081' }), allowed, 'admin', 'admin_hosts')).toThrow(
      /add it to admin_hosts \(LLMGW_ADMIN_HOSTS\)/,
    );
    expect(() => checkHost(request({}), allowed, 'admin', 'admin_hosts'), 'no Host at all').toThrow(/does not answer/);
  });

  // Regression: Node keeps the first of two Host headers and the check read only that, and an
  // absolute-form target (`POST http://evil.example/api/v1/keys`) was never looked at: a request
  // could reach the listener under a name it does not answer to.
  it('refuses a second Host header, and an absolute-form target whose authority is not allowed', () => {
    const allowed = hostAllowlist({ boundHost: '127.0.0.1', extra: [], credentialsRequired: false });
    const withRaw = (rawHeaders: string[], url: string) =>
      ({ headers: { host: rawHeaders[1] }, raw: { rawHeaders, url } }) as unknown as FastifyRequest;
    const refusal = (r: FastifyRequest): unknown => {
      try {
        checkHost(r, allowed, 'admin', 'admin_hosts');
        return null;
      } catch (err) {
        return { code: (err as { code: string }).code, message: (err as Error).message };
      }
    };
    expect(refusal(withRaw(['Host', '127.0.0.1:8081'], '/api/v1/keys')), 'one Host header, a path').toBeNull();
    expect(refusal(withRaw(['Host', '127.0.0.1:8081', 'host', 'evil.example'], '/api/v1/keys'))).toEqual({
      code: 'LLMGW_BAD_REQUEST',
      message: 'the request carries 2 Host headers; send exactly one',
    });
    expect(
      refusal(withRaw(['HOST', '127.0.0.1', 'Accept', '*/*', 'Host', '127.0.0.1'], '/')),
      'the same name twice is two headers still',
    ).toMatchObject({ code: 'LLMGW_BAD_REQUEST' });
    for (const target of [
      'http://evil.example/api/v1/keys',
      'https://evil.example:8081/x',
      'http://127.0.0.1@evil.example/x',
      'http://127.0.0.1.evil.example/',
      'ftp://127.0.0.1/x',
      'http:evil',
    ]) {
      expect(refusal(withRaw(['Host', '127.0.0.1:8081'], target)), target).toMatchObject({
        code: 'LLMGW_HOST_NOT_ALLOWED',
        message: expect.stringMatching(/request target names; send the path alone/),
      });
    }
    for (const target of [
      'http://127.0.0.1:8081/api/v1/keys',
      'HTTPS://LOCALHOST/x',
      'http://[::1]:1/',
      'http://127.0.0.2/',
      '*',
    ]) {
      expect(refusal(withRaw(['Host', '127.0.0.1:8081'], target)), target).toBeNull();
    }
    // No allowlist (every interface, credential required): any name, but still one Host header.
    const open = (r: FastifyRequest) => () => checkHost(r, null, 'client', 'client_hosts');
    expect(open(withRaw(['Host', 'a.example'], 'http://b.example/'))).not.toThrow();
    expect(open(withRaw(['Host', 'a.example', 'Host', 'b.example'], '/'))).toThrow(/2 Host headers/);
  });

  it('accepts any Host on every interface only when a credential is required', () => {
    expect(hostAllowlist({ boundHost: '0.0.0.0', extra: [], credentialsRequired: true })).toBeNull();
    expect(hostAllowlist({ boundHost: '::', extra: [], credentialsRequired: true })).toBeNull();
    expect(hostAllowlist({ boundHost: '0.0.0.0', extra: ['gw.example.com'], credentialsRequired: true })).toEqual(
      new Set(['gw.example.com', 'localhost', '127.0.0.1', '::1']),
    );
    expect(
      hostAllowlist({ boundHost: '0.0.0.0', extra: [], credentialsRequired: false }),
      'no credential: never open',
    ).not.toBeNull();
    expect(hostAllowlist({ boundHost: '10.0.0.5', extra: [], credentialsRequired: true })).toEqual(
      new Set(['10.0.0.5', 'localhost', '127.0.0.1', '::1']),
    );
  });
});

describe('cross-site writes', () => {
  it('refuses another origin or a cross-site fetch, and holds nothing a script does not send against it', () => {
    expect(crossSiteProblem(request({ host: '127.0.0.1:8081' }))).toBeNull();
    expect(crossSiteProblem(request({ host: '127.0.0.1:8081', origin: 'http://127.0.0.1:8081' }))).toBeNull();
    expect(crossSiteProblem(request({ host: 'h', origin: 'http://h:80', 'sec-fetch-site': 'same-origin' }))).toBeNull();
    expect(crossSiteProblem(request({ host: '127.0.0.1:8081', origin: 'http://127.0.0.1:3000' }))).toMatch(
      /not this listener's origin/,
    );
    expect(crossSiteProblem(request({ host: '127.0.0.1:8081', origin: 'null' }))).toMatch(/not this listener's origin/);
    expect(crossSiteProblem(request({ host: '127.0.0.1:8081', 'sec-fetch-site': 'cross-site' }))).toMatch(
      /another site/,
    );
    expect(crossSiteProblem(request({ host: '127.0.0.1:8081', 'sec-fetch-site': 'same-site' }))).toMatch(
      /another site/,
    );
  });

  it('takes application/json with parameters as JSON, and nothing else', () => {
    expect(isJsonContentType('application/json')).toBe(true);
    expect(isJsonContentType('Application/JSON; charset=utf-8')).toBe(true);
    expect(isJsonContentType('text/plain')).toBe(false);
    expect(isJsonContentType('application/jsonx')).toBe(false);
    expect(isJsonContentType(undefined)).toBe(false);
  });
});
