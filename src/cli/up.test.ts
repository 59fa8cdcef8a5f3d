import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { makeTinyModel } from '../dev/make-model/index.js';
import { readGgufModelFacts } from '../engine/builtin/gguf-check.js';
import { DEMO_CONTEXT_TOKENS, demoModelWanted } from './up.js';

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
