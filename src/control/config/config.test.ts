import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadControlConfig } from './index.js';

function file(text: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-config-'));
  const path = join(dir, 'control.yaml');
  writeFileSync(path, text);
  return path;
}

describe('control configuration', () => {
  it('uses the defaults when nothing is set', () => {
    const c = loadControlConfig({ env: {} });
    expect(c.clientAddr).toEqual({ host: '127.0.0.1', port: 8080 });
    expect(c.adminAddr).toEqual({ host: '127.0.0.1', port: 8081 });
    expect(c.agentAddr).toEqual({ host: '127.0.0.1', port: 8082 });
    expect(c.store).toEqual({ kind: 'sqlite', path: './.llmgw/llmgw.db' });
    expect(c.adminToken).toBeNull();
    expect(c.nodeLostAfterMs).toBe(60_000);
  });

  it('reads CORS origins as a list or comma-separated, and refuses what is no origin or * without keys', () => {
    expect(loadControlConfig({ env: {} }).corsOrigins, 'none by default').toEqual([]);
    expect(loadControlConfig({ env: { LLMGW_CORS_ORIGINS: 'https://a.example, http://localhost:3000' } }).corsOrigins).toEqual(['https://a.example', 'http://localhost:3000']);
    expect(loadControlConfig({ file: file('cors_origins: ["*"]\n') }).corsOrigins).toEqual(['*']);
    expect(() => loadControlConfig({ env: { LLMGW_CORS_ORIGINS: 'https://a.example/app' } })).toThrow(/cors_origins: https:\/\/a\.example\/app is not an origin/);
    expect(() => loadControlConfig({ env: { LLMGW_CORS_ORIGINS: '*', LLMGW_API_KEYS: 'off' } })).toThrow(/any web page open in a browser on this machine could use every model/);
  });

  it('reads admin_hosts and client_hosts as a list or comma-separated, and refuses what is no host name', () => {
    const none = loadControlConfig({ env: {} });
    expect([none.adminHosts, none.clientHosts, none.metricsPublic], 'none added, metrics behind the token by default').toEqual([[], [], false]);
    const c = loadControlConfig({ env: { LLMGW_ADMIN_HOSTS: 'Gateway.example.com, 10.0.0.5', LLMGW_METRICS_PUBLIC: 'true' }, file: file('client_hosts: ["api.example.com", "[::1]"]\n') });
    expect(c.adminHosts).toEqual(['gateway.example.com', '10.0.0.5']);
    expect(c.clientHosts).toEqual(['api.example.com', '::1']);
    expect(c.metricsPublic).toBe(true);
    expect(loadControlConfig({ file: file('metrics_public: true\n') }).metricsPublic).toBe(true);
    expect(() => loadControlConfig({ env: { LLMGW_ADMIN_HOSTS: 'gw.example.com:8081' } })).toThrow(/admin_hosts: gw\.example\.com:8081 is not a host name; want a DNS name or an IP address without a port/);
    expect(() => loadControlConfig({ env: { LLMGW_CLIENT_HOSTS: 'http://api.example.com' } })).toThrow(/client_hosts: http:\/\/api\.example\.com is not a host name/);
  });

  it('flags beat env, env beats file, file beats defaults', () => {
    const path = file('client_addr: 127.0.0.1:1001\nadmin_addr: 127.0.0.1:1002\nagent_addr: 127.0.0.1:1003\n');
    const c = loadControlConfig({
      file: path,
      env: { LLMGW_ADMIN_ADDR: '127.0.0.1:2002', LLMGW_AGENT_ADDR: '127.0.0.1:2003' },
      flags: { agent_addr: '127.0.0.1:3003' },
    });
    expect([c.clientAddr.port, c.adminAddr.port, c.agentAddr.port]).toEqual([1001, 2002, 3003]);
  });

  it('names an unknown key and the nearest valid one', () => {
    expect(() => loadControlConfig({ file: file('admin_adr: 127.0.0.1:1\n'), env: {} })).toThrow('admin_adr: unknown field; did you mean "admin_addr"?');
  });

  it('names a bad value and what it wants', () => {
    expect(() => loadControlConfig({ env: { LLMGW_CLIENT_ADDR: 'localhost' } })).toThrow(/client_addr: want host:port/);
    expect(() => loadControlConfig({ env: { LLMGW_STORE: 'mysql://x' } })).toThrow(/store: want sqlite:PATH, a postgres:\/\/ URL, or none/);
    expect(() => loadControlConfig({ env: { LLMGW_NODE_LOST_AFTER: '60' } })).toThrow(/node_lost_after: want a duration/);
  });

  it('refuses a non-loopback admin address without a token', () => {
    expect(() => loadControlConfig({ env: { LLMGW_ADMIN_ADDR: '0.0.0.0:8081' } })).toThrow(/an admin token is required/);
    const ok = loadControlConfig({ env: { LLMGW_ADMIN_ADDR: '0.0.0.0:8081', LLMGW_ADMIN_TOKEN: 'a-long-enough-admin-token' } });
    expect(ok.adminToken).toBe('a-long-enough-admin-token');
  });

  it('reads tokens from files and refuses both forms at once', () => {
    const tokenFile = file('  join-token-from-a-file-0123\n');
    expect(loadControlConfig({ env: { LLMGW_JOIN_TOKEN_FILE: tokenFile } }).joinToken).toBe('join-token-from-a-file-0123');
    expect(() => loadControlConfig({ env: { LLMGW_JOIN_TOKEN_FILE: tokenFile, LLMGW_JOIN_TOKEN: 'join-token-inline-0123456' } })).toThrow(
      'join_token and join_token_file are both set',
    );
    expect(() => loadControlConfig({ env: { LLMGW_ADMIN_TOKEN_FILE: '/nonexistent/token' } })).toThrow(/admin_token_file \/nonexistent\/token cannot be read: ENOENT/);
  });

  it('refuses a config file that is not a mapping, or not YAML', () => {
    expect(() => loadControlConfig({ file: file('- a\n- b\n'), env: {} })).toThrow('must be a mapping');
    expect(() => loadControlConfig({ file: file('a: [\n'), env: {} })).toThrow('is not valid YAML');
    expect(() => loadControlConfig({ file: '/nonexistent.yaml', env: {} })).toThrow('cannot read the config file /nonexistent.yaml');
  });

  it('lists every problem at once', () => {
    try {
      loadControlConfig({ env: { LLMGW_CLIENT_ADDR: 'x', LLMGW_STORE: 'y' } });
      expect.unreachable();
    } catch (err) {
      expect((err as { problems: string[] }).problems).toHaveLength(2);
    }
  });
});
