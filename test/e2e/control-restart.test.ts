// The catalog lives in a real store: a model added over HTTP to a real
// `llmgw control` process is still there after that process is stopped and
// started again. And start-up refuses a configuration it cannot honour.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startControl, startLlmgw, stopAll } from '../support/processes.js';

afterAll(stopAll);

const TOKEN = 'e2e-admin-token-0123456789abcdef';

describe('llmgw control, as a process', () => {
  it('keeps a model added over HTTP across a restart', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-e2e-restart-'));
    const args = ['--store', `sqlite:${join(dir, 'llmgw.db')}`, '--admin-token', TOKEN];
    const first = await startControl(args);
    const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'x-llmgw-actor': 'e2e' };
    const add = await fetch(`${first.urls.admin}/api/v1/models?force=true`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ name: 'kept', aliases: ['k'], source: 'hf://org/kept', profiles: [{ engine: 'sim' }] }),
    });
    expect(add.status).toBe(200);
    const stopped = await first.stop('SIGTERM');
    expect(stopped.code, 'SIGTERM stops the control plane cleanly').toBe(0);

    const second = await startControl(args);
    const list = (await (await fetch(`${second.urls.admin}/api/v1/models`, { headers })).json()) as {
      name: string;
      aliases: string[];
    }[];
    expect(list.map((m) => [m.name, m.aliases])).toEqual([['kept', ['k']]]);
    await second.stop();
  });

  it('refuses to start with a bad configuration, naming the key', async () => {
    const bad = startLlmgw(['control', '--client-addr', 'nowhere', '--log-level', 'loud']);
    expect((await bad.exited).code).toBe(2);
    expect(bad.stderr()).toContain('client_addr: want host:port');
    expect(bad.stderr()).toContain('log_level');
    const open = startLlmgw(['control', '--admin-addr', '0.0.0.0:0', '--store', 'none']);
    expect((await open.exited).code).toBe(2);
    expect(open.stderr()).toContain('an admin token is required');
  });

  it('refuses to start when the catalog file has a broken model', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-e2e-badcat-'));
    const catalog = join(dir, 'catalog.yaml');
    writeFileSync(catalog, '- name: broken\n  source: s3://x\n  profiles: [{engine: sim}]\n');
    const proc = startLlmgw([
      'control',
      '--insecure-no-admin-token',
      '--store',
      'none',
      '--catalog',
      catalog,
      '--client-addr',
      '127.0.0.1:0',
      '--admin-addr',
      '127.0.0.1:0',
      '--agent-addr',
      '127.0.0.1:0',
    ]);
    const { code } = await proc.exited;
    expect(code).toBe(2);
    expect(proc.stderr()).toContain('source scheme "s3:" is not supported');
  });
});
