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
    expect(() => checkHost(request({ host: 'rebound.evil.example:8081' }), allowed, 'admin', 'admin_hosts')).toThrow(/add it to admin_hosts \(LLMGW_ADMIN_HOSTS\)/);
    expect(() => checkHost(request({}), allowed, 'admin', 'admin_hosts'), 'no Host at all').toThrow(/does not answer/);
  });

  it('accepts any Host on every interface only when a credential is required', () => {
    expect(hostAllowlist({ boundHost: '0.0.0.0', extra: [], credentialsRequired: true })).toBeNull();
    expect(hostAllowlist({ boundHost: '::', extra: [], credentialsRequired: true })).toBeNull();
    expect(hostAllowlist({ boundHost: '0.0.0.0', extra: ['gw.example.com'], credentialsRequired: true })).toEqual(new Set(['gw.example.com', 'localhost', '127.0.0.1', '::1']));
    expect(hostAllowlist({ boundHost: '0.0.0.0', extra: [], credentialsRequired: false }), 'no credential: never open').not.toBeNull();
    expect(hostAllowlist({ boundHost: '10.0.0.5', extra: [], credentialsRequired: true })).toEqual(new Set(['10.0.0.5', 'localhost', '127.0.0.1', '::1']));
  });
});

describe('cross-site writes', () => {
  it('refuses another origin or a cross-site fetch, and holds nothing a script does not send against it', () => {
    expect(crossSiteProblem(request({ host: '127.0.0.1:8081' }))).toBeNull();
    expect(crossSiteProblem(request({ host: '127.0.0.1:8081', origin: 'http://127.0.0.1:8081' }))).toBeNull();
    expect(crossSiteProblem(request({ host: 'h', origin: 'http://h:80', 'sec-fetch-site': 'same-origin' }))).toBeNull();
    expect(crossSiteProblem(request({ host: '127.0.0.1:8081', origin: 'http://127.0.0.1:3000' }))).toMatch(/not this listener's origin/);
    expect(crossSiteProblem(request({ host: '127.0.0.1:8081', origin: 'null' }))).toMatch(/not this listener's origin/);
    expect(crossSiteProblem(request({ host: '127.0.0.1:8081', 'sec-fetch-site': 'cross-site' }))).toMatch(/another site/);
    expect(crossSiteProblem(request({ host: '127.0.0.1:8081', 'sec-fetch-site': 'same-site' }))).toMatch(/another site/);
  });

  it('takes application/json with parameters as JSON, and nothing else', () => {
    expect(isJsonContentType('application/json')).toBe(true);
    expect(isJsonContentType('Application/JSON; charset=utf-8')).toBe(true);
    expect(isJsonContentType('text/plain')).toBe(false);
    expect(isJsonContentType('application/jsonx')).toBe(false);
    expect(isJsonContentType(undefined)).toBe(false);
  });
});
