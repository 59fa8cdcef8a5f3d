// The files' rows on both dialects: which ids have a row is what the sweep of
// files_dir (sweep.ts) trusts before removing bytes, so a wrong answer there
// loses a client's file.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { storeBackends } from '../../../test/support/postgres.js';
import { Store } from '../store/index.js';
import { FileRepository } from './files-store.js';

const id = (n: number) => `file-${n.toString(16).padStart(32, '0')}`;

for (const backend of storeBackends('llmgw-files-store')) {
  describe.skipIf(backend.skip)(`file rows on ${backend.name}`, () => {
    let store: Store;
    let teardown: () => Promise<void>;
    beforeEach(async () => {
      const b = await backend.setup();
      teardown = b.teardown;
      store = await Store.open({ location: b.location });
    });
    afterEach(async () => {
      await store.close();
      await teardown();
    });

    it("says which ids have a row, whoever's, over many at once", async () => {
      const files = new FileRepository(store.connection);
      for (const [n, owner] of [
        [1, 'team:a'],
        [700, 'team:b'],
      ] as const)
        await files.insert({ id: id(n), owner, purpose: 'batch', filename: 'f', bytes: 1, lines: 1, createdAtMs: 0 });
      const asked = Array.from({ length: 1200 }, (_, i) => id(i));
      expect([...(await files.existing(asked))].sort()).toEqual([id(1), id(700)]);
      expect(await files.existing([])).toEqual(new Set());
    });
  });
}
