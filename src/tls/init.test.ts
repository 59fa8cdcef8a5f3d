import { X509Certificate, createPrivateKey } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  linkSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isLlmgwError } from '../errors/index.js';
import { initTls, parseNodeArg } from './init.js';

const scratch = () => join(mkdtempSync(join(tmpdir(), 'llmgw-tls-')), 'pki');

describe('initTls', () => {
  it('writes a CA and certificates it signed, keys 0600, certificates 0644, the directory 0700', async () => {
    const dir = scratch();
    await initTls({
      dir,
      controlHosts: ['control.example', '10.0.0.1'],
      nodes: [{ name: 'gpu-7', hosts: ['10.0.0.7'] }],
      days: 30,
      force: false,
    });
    expect(readdirSync(dir).sort()).toEqual([
      'ca-key.pem',
      'ca.pem',
      'control-key.pem',
      'control.pem',
      'node-ca-key.pem',
      'node-ca.pem',
      'node-gpu-7-key.pem',
      'node-gpu-7.pem',
    ]);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    for (const f of readdirSync(dir))
      expect(statSync(join(dir, f)).mode & 0o777, f).toBe(f.endsWith('-key.pem') ? 0o600 : 0o644);
    const ca = new X509Certificate(readFileSync(join(dir, 'ca.pem')));
    expect(ca.ca, 'the CA certificate may sign').toBe(true);
    const control = new X509Certificate(readFileSync(join(dir, 'control.pem')));
    expect(control.verify(ca.publicKey), 'signed by the CA').toBe(true);
    expect(control.ca).toBe(false);
    expect(control.subjectAltName).toContain('DNS:control.example');
    expect(control.subjectAltName).toContain('IP Address:10.0.0.1');
    expect(control.subjectAltName).toContain('DNS:localhost');
    expect(control.subjectAltName).toContain('IP Address:127.0.0.1');
    expect(control.checkHost('control.example')).toBe('control.example');
    expect(control.keyUsage, 'the control plane serves; it is no client').toEqual(['1.3.6.1.5.5.7.3.1']);
    // A node's key must not pass for the control plane or for loopback: its certificate comes from the node CA
    // (which agents refuse as the control plane's issuer) and names the node alone.
    const nodeCa = new X509Certificate(readFileSync(join(dir, 'node-ca.pem')));
    expect(
      nodeCa.ca && nodeCa.checkIssued(ca) && nodeCa.verify(ca.publicKey),
      'the node CA is a CA under the root',
    ).toBe(true);
    const node = new X509Certificate(readFileSync(join(dir, 'node-gpu-7.pem')));
    expect(node.verify(ca.publicKey), 'the root did not sign a node certificate itself').toBe(false);
    expect(node.checkIssued(nodeCa) && node.verify(nodeCa.publicKey), 'the node CA did').toBe(true);
    expect(
      readFileSync(join(dir, 'node-gpu-7.pem'), 'utf8'),
      'the node certificate file carries the node CA after it',
    ).toContain(nodeCa.toString().trim());
    expect(node.checkHost('gpu-7')).toBe('gpu-7');
    expect(node.checkIP('10.0.0.7')).toBe('10.0.0.7');
    for (const loopback of ['localhost', 'DNS:localhost', 'IP Address:127.0.0.1', 'IP Address:0:0:0:0:0:0:0:1'])
      expect(node.subjectAltName, loopback).not.toContain(loopback);
    expect(node.checkIP('127.0.0.1'), 'a node certificate never names loopback').toBeUndefined();
    expect(
      node.checkPrivateKey(createPrivateKey(readFileSync(join(dir, 'node-gpu-7-key.pem')))),
      'the key matches its certificate',
    ).toBe(true);
    const days = (Date.parse(node.validTo) - Date.now()) / 86_400_000;
    expect(days).toBeGreaterThan(29);
    expect(days).toBeLessThan(31);
  });

  it('refuses to overwrite, leaving every file as it was, unless forced', async () => {
    const dir = scratch();
    await initTls({ dir, controlHosts: [], nodes: [], days: 1, force: false });
    const before = readFileSync(join(dir, 'ca-key.pem'), 'utf8');
    const refused = await initTls({
      dir,
      controlHosts: [],
      nodes: [{ name: 'n1', hosts: [] }],
      days: 1,
      force: false,
    }).catch((e: unknown) => e);
    expect(isLlmgwError(refused) && refused.code).toBe('LLMGW_TLS_FILE_EXISTS');
    expect((refused as Error).message).toContain('--force');
    expect(readFileSync(join(dir, 'ca-key.pem'), 'utf8')).toBe(before);
    expect(existsSync(join(dir, 'node-n1.pem')), 'nothing new written after a refusal').toBe(false);
    writeFileSync(join(dir, 'control-key.pem'), 'old', { mode: 0o644 });
    await initTls({ dir, controlHosts: [], nodes: [], days: 1, force: true });
    expect(readFileSync(join(dir, 'ca-key.pem'), 'utf8')).not.toBe(before);
    expect(statSync(join(dir, 'control-key.pem')).mode & 0o777, 'an overwritten key is 0600 again').toBe(0o600);
  });

  it('with --force, writes a new key to a fresh 0600 file renamed over the old one, never into the old file', async () => {
    // The new private key was written into the existing file, under its old mode (0644 if loosened) until
    // a chmod, and into every hard link to it for good: anyone who could read the old key got the new one.
    const dir = scratch();
    await initTls({ dir, controlHosts: [], nodes: [], days: 1, force: false });
    const key = join(dir, 'control-key.pem');
    chmodSync(key, 0o644);
    const oldKey = readFileSync(key, 'utf8');
    const link = join(dirname(dir), 'readable-link-to-old-key.pem');
    linkSync(key, link);
    const oldInode = statSync(key).ino;

    await initTls({ dir, controlHosts: [], nodes: [], days: 1, force: true });
    expect(readFileSync(key, 'utf8'), 'a new key').not.toBe(oldKey);
    expect(statSync(key).ino, 'a new file, not the old one rewritten').not.toBe(oldInode);
    expect(readFileSync(link, 'utf8'), 'a hard link to the old file keeps the old key, not the new one').toBe(oldKey);
    expect(statSync(key).mode & 0o777).toBe(0o600);
    expect(
      readdirSync(dir).filter((f) => f.endsWith('.tmp')),
      'no temporary file left behind',
    ).toEqual([]);
  });

  it('refuses a node name that is not a node id, and a bad --days, before writing anything', async () => {
    const dir = scratch();
    const err = await initTls({
      dir,
      controlHosts: ['bad host'],
      nodes: [{ name: '../x', hosts: [] }],
      days: 0,
      force: false,
    }).catch((e: unknown) => e);
    expect(isLlmgwError(err) && err.code).toBe('LLMGW_CONFIG_INVALID');
    expect((err as Error).message).toContain('"../x" is not a node id');
    expect((err as Error).message).toContain('--days');
    expect((err as Error).message).toContain('"bad host"');
    expect(existsSync(dir)).toBe(false);
    for (const nodes of [
      [{ name: 'n1', hosts: ['127.0.0.1'] }],
      [{ name: 'n1', hosts: ['::1'] }],
      [{ name: 'localhost', hosts: [] }],
    ]) {
      const loopback = await initTls({ dir, controlHosts: [], nodes, days: 1, force: false }).catch((e: unknown) => e);
      expect((loopback as Error).message, JSON.stringify(nodes)).toMatch(
        /is a loopback name; a node certificate never names loopback/,
      );
    }
    expect(existsSync(dir)).toBe(false);
  });
});

describe('parseNodeArg', () => {
  it('reads a name alone or with the addresses it is reached by', () => {
    expect(parseNodeArg('gpu-7')).toEqual({ name: 'gpu-7', hosts: [] });
    expect(parseNodeArg('gpu-7=10.0.0.7, gpu-7.example')).toEqual({
      name: 'gpu-7',
      hosts: ['10.0.0.7', 'gpu-7.example'],
    });
  });
});
