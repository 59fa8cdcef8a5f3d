import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { makeTinyModel } from '../dev/make-model/index.js';
import { readGgufModelFacts } from '../engine/builtin/gguf-check.js';
import { resolveConnection } from '../ctl/connection.js';
import { DEMO_CONTEXT_TOKENS, demoModelWanted, removeUpPointer, writeUpPointer } from './up.js';

describe("`llmgw up`'s demo model", () => {
  // Guards against a demo that refuses every tool call: at 256 tokens a tool with one parameter overflowed it,
  // and a data dir made by an earlier llmgw kept that file for ever.
  it('holds at least 4,096 tokens, and an older, smaller demo file is made again', async () => {
    expect(DEMO_CONTEXT_TOKENS).toBeGreaterThanOrEqual(4096);
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-up-demo-'));
    const path = join(dir, 'demo.gguf');
    expect(await demoModelWanted(path), 'absent').toBe(true);
    await makeTinyModel(path, { seed: 1 });
    expect((await readGgufModelFacts(path)).trainedContextTokens).toBe(256);
    expect(await demoModelWanted(path), 'made with the old 256-token context').toBe(true);
    await makeTinyModel(path, { seed: 1, contextLength: DEMO_CONTEXT_TOKENS });
    expect(await demoModelWanted(path), 'made as up makes it now').toBe(false);
  });
});

describe("`llmgw up`'s pointer in the user's state dir", () => {
  // Guards against ctl failing outside the directory that holds .llmgw while `llmgw up` runs: the pointer is
  // what ctl finds it by, and one left by an up that stopped cleanly would send ctl to a dead address.
  it('is what ctl reads, and a clean stop removes it unless a later up took it over', () => {
    const env = { XDG_STATE_HOME: mkdtempSync(join(tmpdir(), 'llmgw-up-state-')) };
    const said: string[] = [];
    const pointer = { pid: process.pid, data_dir: '/nowhere/.llmgw', admin_url: 'http://127.0.0.1:9001' };
    const path = writeUpPointer(env, pointer, (l) => said.push(l));
    expect(path).toBe(join(env.XDG_STATE_HOME, 'llmgw', 'up.json'));
    expect(JSON.parse(readFileSync(path!, 'utf8'))).toEqual(pointer);
    expect(resolveConnection({}, env, tmpdir()).looked.join('\n'), 'ctl follows it').toContain(
      '/nowhere/.llmgw/control.json (named by',
    );
    removeUpPointer(path, process.pid + 1);
    expect(existsSync(path!), "another up's pointer is left").toBe(true);
    removeUpPointer(path, process.pid);
    expect(existsSync(path!)).toBe(false);
    expect(said).toEqual([]);
    expect(
      writeUpPointer({}, pointer, (l) => said.push(l)),
      'no HOME: none, and up goes on',
    ).toBeNull();
  });
});
