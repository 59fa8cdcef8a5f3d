import { constants } from 'node:buffer';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { initTls } from '../../tls/init.js';
import { RESPONSE_STORE_DEFAULTS } from '../responses/index.js';
import {
  CONTROL_DEFAULTS,
  CONTROL_OPTION_KEYS,
  compileControlOptions,
  loadControlConfig,
  MAX_CONNECTIONS_DEFAULTS,
} from './index.js';
import { MAX_FILE_BYTES } from './batches.js';

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

  it('fills every absent key from CONTROL_DEFAULTS: writing the table out compiles to what an empty file does', () => {
    // Guards against a default written twice (a schema literal beside the table) that drifts from it.
    for (const key of Object.keys(CONTROL_DEFAULTS)) {
      expect(CONTROL_OPTION_KEYS, `CONTROL_DEFAULTS.${key} names no option`).toContain(key);
    }
    const { maxConnections: emptyCaps, ...empty } = compileControlOptions({});
    const { maxConnections: writtenCaps, ...written } = compileControlOptions({ ...CONTROL_DEFAULTS });
    expect(written).toEqual(empty);
    expect({ ...writtenCaps, set: [] }, 'the same caps, only now set by the operator').toEqual(emptyCaps);
    expect(empty.router.headersTimeoutMs, "the router's own default").toBe(300_000);
    expect(empty.uploadLimitBytes).toBe(25 * 2 ** 20);
  });

  it('reads CORS origins as a list or comma-separated, and refuses what is no origin or * without keys', () => {
    expect(loadControlConfig({ env: {} }).corsOrigins, 'none by default').toEqual([]);
    expect(
      loadControlConfig({ env: { LLMGW_CORS_ORIGINS: 'https://a.example, http://localhost:3000' } }).corsOrigins,
    ).toEqual(['https://a.example', 'http://localhost:3000']);
    expect(loadControlConfig({ file: file('cors_origins: ["*"]\n') }).corsOrigins).toEqual(['*']);
    expect(() => loadControlConfig({ env: { LLMGW_CORS_ORIGINS: 'https://a.example/app' } })).toThrow(
      /cors_origins: https:\/\/a\.example\/app is not an origin/,
    );
    expect(() => loadControlConfig({ env: { LLMGW_CORS_ORIGINS: '*', LLMGW_API_KEYS: 'off' } })).toThrow(
      /any web page open in a browser on this machine could use every model/,
    );
  });

  it('keeps Responses API responses 30 days and 64 MiB per key by default; 0 bytes keeps none; ttl must be more than 0', () => {
    expect(loadControlConfig({ env: {} }).responses, 'the defaults the stores document').toEqual(
      RESPONSE_STORE_DEFAULTS,
    );
    expect(
      loadControlConfig({ env: { LLMGW_RESPONSES_TTL: '1h', LLMGW_RESPONSES_MAX_PER_KEY: '1g' } }).responses,
    ).toEqual({ ttlMs: 3_600_000, maxBytesPerKey: 2 ** 30 });
    expect(loadControlConfig({ file: file('responses_max_per_key: "0"\n') }).responses.maxBytesPerKey).toBe(0);
    expect(() => loadControlConfig({ flags: { responses_max_per_key: 'lots' } })).toThrow(
      /responses_max_per_key: want a size/,
    );
    expect(() => loadControlConfig({ flags: { responses_ttl: '0s' } })).toThrow(
      /responses_ttl \(0s\) must be longer than 0/,
    );
  });

  it('refuses a timeout or interval longer than a timer can wait, or 0 where 0 would end every request or spin', () => {
    // Node fires a timer of more than 2^31 - 1 ms after 1 ms: a request_timeout of 30d answered every request 504 at once.
    for (const [key, value] of [
      ['request_timeout', '30d'],
      ['upstream_headers_timeout', '25d'],
      ['idle_body_timeout', '1000h'],
      ['cold_start_timeout', '25d'],
      ['reconcile_interval', '30d'],
      ['node_lost_after', '60d'],
    ] as const) {
      expect(() => loadControlConfig({ flags: { [key]: value } }), `${key} ${value}`).toThrow(
        new RegExp(`${key}: want a duration .*up to 24d`),
      );
    }
    for (const key of ['request_timeout', 'reconcile_interval', 'remote_probe_interval'] as const) {
      expect(() => loadControlConfig({ flags: { [key]: '0s' } }), `${key} 0s`).toThrow(
        new RegExp(`${key}: want a duration above 0 and up to 24d`),
      );
    }
    expect(loadControlConfig({ flags: { request_timeout: '24d' } }).router.totalTimeoutMs).toBe(24 * 86_400_000);
    expect(loadControlConfig({ flags: { idle_body_timeout: '0s' } }).router.idleBodyTimeoutMs, '0 = no limit').toBe(0);
    // A stored response's age is no timer: longer is fine.
    expect(loadControlConfig({ flags: { responses_ttl: '90d' } }).responses.ttlMs).toBe(90 * 86_400_000);
  });

  it('refuses a files_max_size past the longest string Node makes, which a batch input is read as', () => {
    // A 600 MB input under files_max_size: 1g was taken, then answered 500 (ERR_STRING_TOO_LONG) when its lines were read.
    expect(() => loadControlConfig({ flags: { files_max_size: '1g' } })).toThrow(
      /files_max_size: want a size above 0 and at most 511m, like 200m \(a batch input is read as one string/,
    );
    expect(() => loadControlConfig({ flags: { files_max_size: '512m' } })).toThrow(/files_max_size/);
    expect(loadControlConfig({ flags: { files_max_size: '511m' } }).batches.fileMaxBytes).toBe(511 * 2 ** 20);
    expect(MAX_FILE_BYTES, 'bytes to UTF-8 characters: one at most each').toBe(constants.MAX_STRING_LENGTH);
  });

  it.runIf(constants.MAX_LENGTH === 2 ** 32)(
    'refuses a max_upload_size past the largest Buffer (Node 20: 4 GiB)',
    () => {
      // An upload is held whole: past it Buffer.concat threw at the end of the body and ended the process.
      expect(() => loadControlConfig({ flags: { max_upload_size: '5g' } })).toThrow(
        /max_upload_size: want a size up to 4 GiB, like 25m or 1g \(an upload is held whole in one Buffer\)/,
      );
      expect(loadControlConfig({ flags: { max_upload_size: '4g' } }).uploadLimitBytes).toBe(4 * 2 ** 30);
    },
  );

  it('reads max_held_per_key from file, env or flag, 32 by default, and refuses less than 1', () => {
    expect(loadControlConfig({ env: {} }).maxHeldPerKey).toBe(32);
    expect(loadControlConfig({ file: file('max_held_per_key: 4\n') }).maxHeldPerKey).toBe(4);
    expect(loadControlConfig({ env: { LLMGW_MAX_HELD_PER_KEY: '7' } }).maxHeldPerKey).toBe(7);
    expect(loadControlConfig({ flags: { max_held_per_key: '2' } }).maxHeldPerKey).toBe(2);
    expect(() => loadControlConfig({ env: { LLMGW_MAX_HELD_PER_KEY: '0' } })).toThrow(/max_held_per_key/);
  });

  it("caps each listener's connections by default, takes a number from file, env or flag (0 = no cap), and says which were set", () => {
    expect(loadControlConfig({ env: {} }).maxConnections).toEqual({ ...MAX_CONNECTIONS_DEFAULTS, set: [] });
    expect(MAX_CONNECTIONS_DEFAULTS.agent, "room for a 10,000-node fleet's long polls").toBeGreaterThan(10_000);
    expect(loadControlConfig({ file: file('client_max_connections: 100\n') }).maxConnections).toMatchObject({
      client: 100,
      set: ['client'],
    });
    expect(loadControlConfig({ env: { LLMGW_AGENT_MAX_CONNECTIONS: '0' } }).maxConnections).toMatchObject({
      agent: 0,
      set: ['agent'],
    });
    expect(loadControlConfig({ flags: { admin_max_connections: '64' } }).maxConnections).toMatchObject({
      admin: 64,
      set: ['admin'],
    });
    expect(() => loadControlConfig({ flags: { client_max_connections: 'lots' } })).toThrow(
      /client_max_connections: want a whole number of connections, 0 for no cap/,
    );
    expect(() => loadControlConfig({ file: file('agent_max_connections: -1\n') })).toThrow(/agent_max_connections/);
  });

  it('leaves V8 its own heap growing heuristic by default, takes a percent from file, env or flag, and refuses a stray value', () => {
    expect(loadControlConfig({ env: {} }).heapGrowingPercent).toBe(0);
    expect(loadControlConfig({ file: file('heap_growing_percent: 50\n') }).heapGrowingPercent).toBe(50);
    expect(loadControlConfig({ env: { LLMGW_HEAP_GROWING_PERCENT: '100' } }).heapGrowingPercent).toBe(100);
    expect(() => loadControlConfig({ flags: { heap_growing_percent: 'half' } })).toThrow(
      /heap_growing_percent: want a whole number of percent/,
    );
    expect(
      () => loadControlConfig({ env: { LLMGW_HEAP_GROWING_PERCENT: '5000' } }),
      'the same range as a number in the file',
    ).toThrow(/from 0 to 1000/);
  });

  it('refuses unsafe profile env unless allow_unsafe_profile_env is true, from the file, the environment or a flag', () => {
    expect(loadControlConfig({ env: {} }).allowUnsafeProfileEnv, 'off by default').toBe(false);
    expect(loadControlConfig({ file: file('allow_unsafe_profile_env: true\n') }).allowUnsafeProfileEnv).toBe(true);
    expect(loadControlConfig({ env: { LLMGW_ALLOW_UNSAFE_PROFILE_ENV: 'true' } }).allowUnsafeProfileEnv).toBe(true);
    expect(loadControlConfig({ env: {}, flags: { allow_unsafe_profile_env: 'false' } }).allowUnsafeProfileEnv).toBe(
      false,
    );
    expect(() => loadControlConfig({ env: { LLMGW_ALLOW_UNSAFE_PROFILE_ENV: 'yes' } })).toThrow(
      /allow_unsafe_profile_env/,
    );
  });

  it('reads admin_hosts and client_hosts as a list or comma-separated, and refuses what is no host name', () => {
    const none = loadControlConfig({ env: {} });
    expect(
      [none.adminHosts, none.clientHosts, none.metricsPublic],
      'none added, metrics behind the token by default',
    ).toEqual([[], [], false]);
    const c = loadControlConfig({
      env: { LLMGW_ADMIN_HOSTS: 'Gateway.example.com, 10.0.0.5', LLMGW_METRICS_PUBLIC: 'true' },
      file: file('client_hosts: ["api.example.com", "[::1]"]\n'),
    });
    expect(c.adminHosts).toEqual(['gateway.example.com', '10.0.0.5']);
    expect(c.clientHosts).toEqual(['api.example.com', '::1']);
    expect(c.metricsPublic).toBe(true);
    expect(loadControlConfig({ file: file('metrics_public: true\n') }).metricsPublic).toBe(true);
    expect(() => loadControlConfig({ env: { LLMGW_ADMIN_HOSTS: 'gw.example.com:8081' } })).toThrow(
      /admin_hosts: gw\.example\.com:8081 is not a host name; want a DNS name or an IP address without a port/,
    );
    expect(() => loadControlConfig({ env: { LLMGW_CLIENT_HOSTS: 'http://api.example.com' } })).toThrow(
      /client_hosts: http:\/\/api\.example\.com is not a host name/,
    );
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

  it('reads join_approval, auto unless set to manual', () => {
    expect(loadControlConfig({ env: {} }).joinApproval).toBe('auto');
    expect(loadControlConfig({ env: { LLMGW_JOIN_APPROVAL: 'manual' } }).joinApproval).toBe('manual');
    expect(loadControlConfig({ file: file('join_approval: manual\n') }).joinApproval).toBe('manual');
    expect(() => loadControlConfig({ env: { LLMGW_JOIN_APPROVAL: 'maybe' } })).toThrow(/join_approval/);
  });

  it('names an unknown key and the nearest valid one', () => {
    expect(() => loadControlConfig({ file: file('admin_adr: 127.0.0.1:1\n'), env: {} })).toThrow(
      'admin_adr: unknown field; did you mean "admin_addr"?',
    );
  });

  it('names a bad value and what it wants', () => {
    expect(() => loadControlConfig({ env: { LLMGW_CLIENT_ADDR: 'localhost' } })).toThrow(/client_addr: want host:port/);
    expect(() => loadControlConfig({ env: { LLMGW_STORE: 'mysql://x' } })).toThrow(
      /store: want sqlite:PATH, a postgres:\/\/ URL, or none/,
    );
    expect(() => loadControlConfig({ env: { LLMGW_NODE_LOST_AFTER: '60' } })).toThrow(
      /node_lost_after: want a duration/,
    );
  });

  it('refuses a non-loopback admin address without a token', () => {
    expect(() => loadControlConfig({ env: { LLMGW_ADMIN_ADDR: '0.0.0.0:8081' } })).toThrow(
      /an admin token is required/,
    );
    const ok = loadControlConfig({
      env: { LLMGW_ADMIN_ADDR: '0.0.0.0:8081', LLMGW_ADMIN_TOKEN: 'a-long-enough-admin-token' },
    });
    expect(ok.adminToken).toBe('a-long-enough-admin-token');
  });

  it('runs without an admin token only when insecure_no_admin_token says so, from the file, the environment or a flag', () => {
    // With no admin token, `llmgw control` served every admin call on loopback to any local user; now it makes one unless told (issue 33).
    expect(loadControlConfig({}).insecureNoAdminToken, 'absent = make one').toBe(false);
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-config-insecure-'));
    writeFileSync(join(dir, 'c.yaml'), 'insecure_no_admin_token: true\n');
    expect(loadControlConfig({ file: join(dir, 'c.yaml') }).insecureNoAdminToken).toBe(true);
    expect(loadControlConfig({ env: { LLMGW_INSECURE_NO_ADMIN_TOKEN: 'true' } }).insecureNoAdminToken).toBe(true);
    expect(loadControlConfig({ flags: { insecure_no_admin_token: 'false' } }).insecureNoAdminToken).toBe(false);
    expect(() => loadControlConfig({ flags: { insecure_no_admin_token: 'yes' } })).toThrow(/insecure_no_admin_token/);
    expect(
      () => loadControlConfig({ env: { LLMGW_ADMIN_ADDR: '0.0.0.0:8081', LLMGW_INSECURE_NO_ADMIN_TOKEN: 'true' } }),
      'never off loopback',
    ).toThrow(/an admin token is required/);
  });

  it('reads tokens from files and refuses both forms at once', () => {
    const tokenFile = file('  join-token-from-a-file-0123\n');
    expect(loadControlConfig({ env: { LLMGW_JOIN_TOKEN_FILE: tokenFile } }).joinToken).toBe(
      'join-token-from-a-file-0123',
    );
    expect(() =>
      loadControlConfig({ env: { LLMGW_JOIN_TOKEN_FILE: tokenFile, LLMGW_JOIN_TOKEN: 'join-token-inline-0123456' } }),
    ).toThrow('join_token and join_token_file are both set');
    expect(() => loadControlConfig({ env: { LLMGW_ADMIN_TOKEN_FILE: '/nonexistent/token' } })).toThrow(
      /admin_token_file \/nonexistent\/token cannot be read: ENOENT/,
    );
  });

  it('refuses a config file that is not a mapping, or not YAML', () => {
    expect(() => loadControlConfig({ file: file('- a\n- b\n'), env: {} })).toThrow('must be a mapping');
    expect(() => loadControlConfig({ file: file('a: [\n'), env: {} })).toThrow('is not valid YAML');
    expect(() => loadControlConfig({ file: '/nonexistent.yaml', env: {} })).toThrow(
      'cannot read the config file /nonexistent.yaml',
    );
  });

  it('lists every problem at once', () => {
    try {
      loadControlConfig({ env: { LLMGW_CLIENT_ADDR: 'x', LLMGW_STORE: 'y' } });
      expect.unreachable();
    } catch (err) {
      expect((err as { problems: string[] }).problems).toHaveLength(2);
    }
  });

  describe('TLS', () => {
    let pki = '';
    beforeAll(async () => {
      pki = join(mkdtempSync(join(tmpdir(), 'llmgw-config-tls-')), 'pki');
      await initTls({ dir: pki, controlHosts: [], nodes: [], days: 1, force: false });
    });

    it('is off on every listener when no certificate is set', () => {
      const c = loadControlConfig({ env: {} });
      expect(c.tls).toEqual({ client: null, admin: null, agent: null });
      expect(c.agentCa).toBeNull();
    });

    it('serves one certificate on all three listeners, and the client one where client_tls_* is set', () => {
      const c = loadControlConfig({ file: file(`tls_cert: ${pki}/control.pem\ntls_key: ${pki}/control-key.pem\n`) });
      expect(c.tls.admin?.cert.toString()).toContain('-----BEGIN CERTIFICATE-----');
      expect(c.tls.admin?.key.toString()).toContain('PRIVATE KEY-----');
      expect(c.tls.agent).toBe(c.tls.admin);
      expect(c.tls.client, 'the same pair unless the client listener has its own').toBe(c.tls.admin);
      const split = loadControlConfig({
        env: { LLMGW_TLS_CERT: `${pki}/control.pem`, LLMGW_TLS_KEY: `${pki}/control-key.pem` },
        flags: { client_tls_cert: `${pki}/ca.pem`, client_tls_key: `${pki}/ca-key.pem` },
      });
      expect(split.tls.client?.cert.equals(split.tls.admin!.cert), 'the client listener has its own certificate').toBe(
        false,
      );
    });

    it('refuses a certificate without its key, a file that cannot be read, and one that is not PEM, naming the key', () => {
      expect(() => loadControlConfig({ env: { LLMGW_TLS_CERT: `${pki}/control.pem` } })).toThrow(
        /tls_cert is set without tls_key; a listener needs both/,
      );
      expect(() =>
        loadControlConfig({ env: { LLMGW_TLS_CERT: `${pki}/nope.pem`, LLMGW_TLS_KEY: `${pki}/control-key.pem` } }),
      ).toThrow(/tls_cert .*nope\.pem cannot be read: ENOENT/);
      expect(() =>
        loadControlConfig({
          env: { LLMGW_TLS_CERT: `${pki}/control-key.pem`, LLMGW_TLS_KEY: `${pki}/control-key.pem` },
        }),
      ).toThrow(/tls_cert .* holds no PEM certificate/);
      expect(() => loadControlConfig({ env: { LLMGW_CLIENT_TLS_KEY: `${pki}/control-key.pem` } })).toThrow(
        /client_tls_key is set without client_tls_cert/,
      );
    });

    it('reads agent_ca, and refuses one that is no certificate', () => {
      expect(loadControlConfig({ flags: { agent_ca: `${pki}/ca.pem` } }).agentCa?.toString()).toContain(
        '-----BEGIN CERTIFICATE-----',
      );
      expect(() => loadControlConfig({ flags: { agent_ca: `${pki}/ca-key.pem` } })).toThrow(
        /agent_ca .* holds no PEM certificate/,
      );
    });

    it('reads engine_ca from a flag, a file or the environment, and refuses one that is no certificate', () => {
      expect(loadControlConfig({ flags: { engine_ca: `${pki}/ca.pem` } }).engineCa?.toString()).toContain(
        '-----BEGIN CERTIFICATE-----',
      );
      expect(
        loadControlConfig({ env: { LLMGW_ENGINE_CA: `${pki}/ca.pem` } }).engineCa,
        'LLMGW_ENGINE_CA',
      ).not.toBeNull();
      expect(loadControlConfig({ env: {} }).engineCa, "absent = the system's CAs").toBeNull();
      expect(() => loadControlConfig({ flags: { engine_ca: `${pki}/ca-key.pem` } })).toThrow(
        /engine_ca .* holds no PEM certificate/,
      );
    });
  });
});
