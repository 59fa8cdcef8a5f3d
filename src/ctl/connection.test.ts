import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConnectionConfigError, DEFAULT_ADMIN_URL, resolveConnection } from './connection.js';

function upDir(url: string, token: string): string {
  const cwd = mkdtempSync(join(tmpdir(), 'llmgw-ctl-conn-'));
  mkdirSync(join(cwd, '.llmgw'));
  writeFileSync(join(cwd, '.llmgw', 'control.json'), JSON.stringify({ admin_url: url }));
  writeFileSync(join(cwd, '.llmgw', 'admin-token'), `${token}\n`);
  return cwd;
}

describe('where ctl finds the admin API', () => {
  it('prefers the flag, then the environment, then a local llmgw up, then the default', () => {
    const cwd = upDir('http://127.0.0.1:9001', 'local-token');
    expect(resolveConnection({ adminUrl: 'http://a:1' }, { LLMGW_ADMIN_URL: 'http://b:2' }, cwd).adminUrl).toBe(
      'http://a:1',
    );
    expect(resolveConnection({}, { LLMGW_ADMIN_URL: 'http://b:2' }, cwd).adminUrl).toBe('http://b:2');
    expect(resolveConnection({}, {}, cwd)).toMatchObject({ adminUrl: 'http://127.0.0.1:9001', token: 'local-token' });
    expect(resolveConnection({}, {}, tmpdir()).adminUrl).toBe(DEFAULT_ADMIN_URL);
  });

  it('sends an admin token found without the control.json written beside it to no one', () => {
    // Sent to the default URL, it went to whatever listened on 127.0.0.1:8081: on a shared host, another user's
    // server. `llmgw control` writes control.json beside the token it makes, as `llmgw up` does.
    const cwd = mkdtempSync(join(tmpdir(), 'llmgw-ctl-conn-'));
    mkdirSync(join(cwd, '.llmgw'));
    writeFileSync(join(cwd, '.llmgw', 'admin-token'), 'made-by-control-0123456789\n');
    expect(resolveConnection({}, {}, cwd)).toMatchObject({
      adminUrl: DEFAULT_ADMIN_URL,
      token: null,
      source: 'default',
    });
  });

  it('never sends the local token to a URL named elsewhere', () => {
    const cwd = upDir('http://127.0.0.1:9001', 'local-token');
    expect(resolveConnection({}, { LLMGW_ADMIN_URL: 'http://elsewhere:8081' }, cwd).token).toBeNull();
  });

  it('says what is wrong with a bad URL or control.json', () => {
    expect(() => resolveConnection({ adminUrl: 'localhost:8081' }, {}, tmpdir())).toThrow(ConnectionConfigError);
    const cwd = mkdtempSync(join(tmpdir(), 'llmgw-ctl-conn-'));
    mkdirSync(join(cwd, 'd'));
    writeFileSync(join(cwd, 'd', 'control.json'), '{');
    expect(() => resolveConnection({ dataDir: 'd' }, {}, cwd)).toThrow(/control.json is not JSON/);
  });

  it('names the actor user@host unless told', () => {
    expect(resolveConnection({}, {}, tmpdir()).actor).toMatch(/^.+@.+$/);
    expect(resolveConnection({ actor: 'ci' }, {}, tmpdir()).actor).toBe('ci');
  });

  it('reads the CA from --ca, then LLMGW_CA, and says what is wrong with a file that is no certificate', () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-ctl-ca-'));
    const pem = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
    writeFileSync(join(dir, 'a.pem'), pem);
    writeFileSync(join(dir, 'b.pem'), pem.replace('MIIB', 'MIIC'));
    writeFileSync(join(dir, 'key.pem'), '-----BEGIN PRIVATE KEY-----\n');
    expect(resolveConnection({}, {}, tmpdir()).ca, 'absent = the system CAs').toBeNull();
    expect(
      resolveConnection({ ca: join(dir, 'a.pem') }, { LLMGW_CA: join(dir, 'b.pem') }, tmpdir()).ca?.toString(),
    ).toContain('MIIB');
    expect(resolveConnection({}, { LLMGW_CA: join(dir, 'b.pem') }, tmpdir()).ca?.toString()).toContain('MIIC');
    expect(() => resolveConnection({ ca: join(dir, 'key.pem') }, {}, tmpdir())).toThrow(
      /--ca: .*key\.pem holds no PEM certificate/,
    );
    expect(() => resolveConnection({}, { LLMGW_CA: join(dir, 'none.pem') }, tmpdir())).toThrow(
      /LLMGW_CA: cannot read .*none\.pem \(ENOENT\)/,
    );
  });
});
