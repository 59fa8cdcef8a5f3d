import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConnectionConfigError, DEFAULT_ADMIN_URL, resolveConnection, upPointerPath } from './connection.js';

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

  // Guards against "is `llmgw control` running?" for someone who ran `llmgw up` in another directory: ctl looked
  // only in ./.llmgw, and said nothing of where it had looked.
  describe('a running `llmgw up` elsewhere, through its pointer in the user state dir', () => {
    function pointerTo(dataDir: string, pid: number): Record<string, string> {
      const state = mkdtempSync(join(tmpdir(), 'llmgw-ctl-state-'));
      mkdirSync(join(state, 'llmgw'));
      writeFileSync(
        join(state, 'llmgw', 'up.json'),
        JSON.stringify({ pid, data_dir: dataDir, admin_url: 'http://127.0.0.1:9001' }),
      );
      return { XDG_STATE_HOME: state };
    }
    const elsewhere = () => mkdtempSync(join(tmpdir(), 'llmgw-ctl-cwd-'));

    it('is found from any directory, after ./.llmgw and never instead of a named data dir', () => {
      const env = pointerTo(join(upDir('http://127.0.0.1:9001', 'up-token'), '.llmgw'), process.pid);
      expect(resolveConnection({}, env, elsewhere())).toMatchObject({
        adminUrl: 'http://127.0.0.1:9001',
        token: 'up-token',
        source: expect.stringMatching(/\.llmgw\/control\.json$/),
      });
      expect(resolveConnection({}, env, upDir('http://127.0.0.1:9002', 'here')).adminUrl, './.llmgw first').toBe(
        'http://127.0.0.1:9002',
      );
      expect(resolveConnection({ dataDir: 'd' }, env, elsewhere()).adminUrl, 'a named data dir only').toBe(
        DEFAULT_ADMIN_URL,
      );
      expect(resolveConnection({}, { ...env, LLMGW_DATA_DIR: 'd' }, elsewhere()).adminUrl).toBe(DEFAULT_ADMIN_URL);
    });

    it('is ignored once its process is gone, and the places ctl looked are told', () => {
      const gone = spawnSync(process.execPath, ['-e', '']).pid!;
      const dataDir = join(upDir('http://127.0.0.1:9001', 'up-token'), '.llmgw');
      const env = pointerTo(dataDir, gone);
      const cwd = elsewhere();
      const conn = resolveConnection({}, env, cwd);
      expect(conn).toMatchObject({ adminUrl: DEFAULT_ADMIN_URL, token: null, source: 'default' });
      expect(conn.looked).toEqual([
        `${join(cwd, '.llmgw', 'control.json')}: none`,
        `${join(env.XDG_STATE_HOME!, 'llmgw', 'up.json')}: names \`llmgw up\` pid ${gone}, which is not running`,
      ]);
      expect(resolveConnection({}, { XDG_STATE_HOME: elsewhere() }, cwd).looked[1]).toMatch(/up\.json: none$/);
      expect(resolveConnection({ adminUrl: 'http://a:1' }, env, cwd).looked, 'nothing looked for').toEqual([]);
    });

    it('lives in XDG_STATE_HOME/llmgw, else ~/.local/state/llmgw', () => {
      expect(upPointerPath({ XDG_STATE_HOME: '/s', HOME: '/h' })).toBe('/s/llmgw/up.json');
      expect(upPointerPath({ XDG_STATE_HOME: 'relative', HOME: '/h' }), 'a relative XDG path is ignored').toBe(
        '/h/.local/state/llmgw/up.json',
      );
      expect(upPointerPath({})).toBeNull();
    });
  });
});
