import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { initTls } from '../tls/init.js';
import { compileAgentOptions } from './agent.js';
import { AGENT_DEFAULTS } from './defaults/index.js';

const base = { stateDir: '/tmp/unused', nodeId: 'n1' };

describe('agent options: how the control plane is reached', () => {
  let pki = '';
  beforeAll(async () => {
    pki = join(mkdtempSync(join(tmpdir(), 'llmgw-agent-tls-')), 'pki');
    await initTls({ dir: pki, controlHosts: [], nodes: [{ name: 'n1', hosts: [] }], days: 1, force: false });
  });

  it('allows plain http on loopback, as `llmgw up` and tests use it', () => {
    for (const url of ['http://127.0.0.1:8082', 'http://localhost:8082', 'http://[::1]:8082']) {
      expect(compileAgentOptions({ ...base, control: [url] }).ca, url).toBeNull();
    }
  });

  it('refuses plain http to another machine, since the join token would cross it in clear, unless --insecure-http', () => {
    expect(() => compileAgentOptions({ ...base, control: ['http://10.0.0.1:8082'] })).toThrow(
      /plain http to another machine: the join token .* --insecure-http/,
    );
    expect(() =>
      compileAgentOptions({ ...base, control: ['https://10.0.0.1:8082', 'http://control.example:8082'] }),
    ).toThrow(/http:\/\/control\.example:8082 is plain http/);
    expect(compileAgentOptions({ ...base, control: ['http://10.0.0.1:8082'], insecureHttp: true }).controlUrls).toEqual(
      ['http://10.0.0.1:8082'],
    );
  });

  it('reads --ca, and refuses it beside an http URL where it would verify nothing', () => {
    const config = compileAgentOptions({ ...base, control: ['https://10.0.0.1:8082'], ca: `${pki}/ca.pem` });
    expect(config.ca?.toString()).toContain('-----BEGIN CERTIFICATE-----');
    expect(() => compileAgentOptions({ ...base, control: ['http://127.0.0.1:8082'], ca: `${pki}/ca.pem` })).toThrow(
      /--ca is given but --control http:\/\/127\.0\.0\.1:8082 is plain http/,
    );
    expect(() => compileAgentOptions({ ...base, control: ['https://10.0.0.1:8082'], ca: `${pki}/nope.pem` })).toThrow(
      /--ca .*nope\.pem cannot be read/,
    );
  });

  it('reads the management certificate as a pair', () => {
    const config = compileAgentOptions({
      ...base,
      control: ['https://10.0.0.1:8082'],
      tlsCert: `${pki}/node-n1.pem`,
      tlsKey: `${pki}/node-n1-key.pem`,
    });
    expect(config.mgmtTls?.cert.toString()).toContain('-----BEGIN CERTIFICATE-----');
    expect(
      compileAgentOptions({ ...base, control: ['https://10.0.0.1:8082'] }).mgmtTls,
      'absent = plain HTTP',
    ).toBeNull();
    expect(() =>
      compileAgentOptions({ ...base, control: ['https://10.0.0.1:8082'], tlsKey: `${pki}/node-n1-key.pem` }),
    ).toThrow(/--tls-key is set without --tls-cert/);
  });

  it('serves engines with the node certificate under --engine-tls, and refuses the flag without one', () => {
    const config = compileAgentOptions({
      ...base,
      control: ['https://10.0.0.1:8082'],
      tlsCert: `${pki}/node-n1.pem`,
      tlsKey: `${pki}/node-n1-key.pem`,
      engineTls: true,
    });
    expect(config.engineTls).toEqual({ certFile: `${pki}/node-n1.pem`, keyFile: `${pki}/node-n1-key.pem` });
    const mgmtOnly = compileAgentOptions({
      ...base,
      control: ['https://10.0.0.1:8082'],
      tlsCert: `${pki}/node-n1.pem`,
      tlsKey: `${pki}/node-n1-key.pem`,
    });
    expect(mgmtOnly.engineTls, 'absent = engines serve plain http').toBeNull();
    expect(() => compileAgentOptions({ ...base, control: ['https://10.0.0.1:8082'], engineTls: true })).toThrow(
      /--engine-tls .* needs --tls-cert and --tls-key/,
    );
  });
});

describe('agent options: defaults', () => {
  it('fills an absent heartbeat interval and management address from AGENT_DEFAULTS', () => {
    const config = compileAgentOptions({ ...base, control: ['http://127.0.0.1:8082'] });
    expect(config.heartbeatIntervalMs).toBe(AGENT_DEFAULTS.heartbeatIntervalMs);
    expect(config.heartbeatIntervalMs, 'as `llmgw agent` always did').toBe(5_000);
    expect([config.mgmtHost, config.mgmtPort], 'loopback, a free port').toEqual(['127.0.0.1', 0]);
    expect(
      compileAgentOptions({ ...base, control: ['http://127.0.0.1:8082'], heartbeatInterval: '2s' }).heartbeatIntervalMs,
    ).toBe(2_000);
  });

  it('refuses a heartbeat interval or control deadline longer than a timer can wait', () => {
    const control = ['http://127.0.0.1:8082'];
    expect(() => compileAgentOptions({ ...base, control, heartbeatInterval: '30d' })).toThrow(
      /--heartbeat-interval 30d is longer than a timer can wait; give at most 24d/,
    );
    expect(() => compileAgentOptions({ ...base, control, controlDeadline: '25d' })).toThrow(
      /--control-deadline 25d is longer than a timer can wait/,
    );
    expect(compileAgentOptions({ ...base, control, heartbeatInterval: '24d' }).heartbeatIntervalMs).toBe(
      24 * 86_400_000,
    );
  });
});
