// The response store's contract, run against every implementation: memory,
// SQLite always, Postgres where LLMGW_TEST_POSTGRES names a server.
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { storeBackends } from '../../../test/support/postgres.js';
import { Store } from '../store/index.js';
import {
  MemoryResponseStore,
  RESPONSE_STORE_DEFAULTS,
  StoredResponses,
  type ResponseStore,
  type ResponseStoreOptions,
  type StoredResponse,
} from './index.js';
import { overCap, responseBody } from './limits.js';

interface Backend {
  name: string;
  skip: string;
  open(options: ResponseStoreOptions): Promise<{ responses: ResponseStore; close(): Promise<void> }>;
}

const backends: Backend[] = [
  {
    name: 'memory',
    skip: '',
    open: async (options) => ({ responses: new MemoryResponseStore(options), close: async () => {} }),
  },
  ...storeBackends('llmgw-responses').map((backend): Backend => ({
    name: backend.name,
    skip: backend.skip,
    async open(options) {
      const { location, teardown } = await backend.setup();
      const store = await Store.open({ location });
      return {
        responses: new StoredResponses(store.responses, options),
        close: async () => {
          await store.close();
          await teardown();
        },
      };
    },
  })),
];

/** A response of `keyId` whose kept JSON is about `size` bytes (padded with text). */
function response(id: string, keyId: string, createdAtMs: number, size = 200): StoredResponse {
  const base: StoredResponse = {
    id,
    keyId,
    model: 'm',
    createdAtMs,
    response: { id, object: 'response', output: [] },
    items: [],
  };
  const pad = Math.max(0, size - Buffer.byteLength(responseBody(base)) - 2);
  return { ...base, items: ['x'.repeat(pad)] };
}

const bytesOf = (r: StoredResponse) => Buffer.byteLength(responseBody(r));

for (const backend of backends) {
  describe.skipIf(backend.skip !== '')(
    `response store on ${backend.name}${backend.skip ? ` (skipped: ${backend.skip})` : ''}`,
    () => {
      let clock = 1_000_000;
      const now = () => clock;
      let close: (() => Promise<void>) | null = null;
      afterEach(async () => {
        await close?.();
        close = null;
      });
      async function open(options: Partial<ResponseStoreOptions> = {}): Promise<ResponseStore> {
        const opened = await backend.open({ ...RESPONSE_STORE_DEFAULTS, now, ...options });
        close = opened.close;
        return opened.responses;
      }

      it('gives a kept response back to its key, whole, and to no other key', async () => {
        const store = await open();
        const r: StoredResponse = {
          id: 'resp_a',
          keyId: 'k1',
          model: 'm',
          createdAtMs: clock,
          response: {
            id: 'resp_a',
            object: 'response',
            status: 'completed',
            output: [{ type: 'message', content: [{ type: 'output_text', text: 'hé ✓' }] }],
          },
          items: [{ type: 'message', role: 'user', content: 'hi' }],
        };
        await store.put(r);
        expect(await store.get('k1', 'resp_a')).toEqual(r);
        expect(await store.get('k2', 'resp_a'), "another key's response reads as unknown").toBeUndefined();
        expect(await store.get('k1', 'resp_missing')).toBeUndefined();
      });

      it('deletes by key: another key cannot, the owner can once', async () => {
        const store = await open();
        await store.put(response('resp_d', 'k1', clock));
        expect(await store.delete('k2', 'resp_d'), 'another key deletes nothing').toBe(false);
        expect(await store.get('k1', 'resp_d'), 'and it is still there').toBeDefined();
        expect(await store.delete('k1', 'resp_d')).toBe(true);
        expect(await store.get('k1', 'resp_d')).toBeUndefined();
        expect(await store.delete('k1', 'resp_d'), 'the second delete finds nothing').toBe(false);
      });

      it('an expired response is never returned, even before a sweep; the sweep drops it', async () => {
        const store = await open({ ttlMs: 60_000 });
        await store.put(response('resp_old', 'k1', clock));
        clock += 30_000;
        await store.put(response('resp_new', 'k1', clock));
        clock += 30_000;
        expect(await store.get('k1', 'resp_old'), 'expired at its ttl').toBeUndefined();
        expect(await store.delete('k1', 'resp_old'), 'an expired one is not there to delete').toBe(false);
        expect(await store.get('k1', 'resp_new')).toBeDefined();
        expect(await store.sweep(clock), 'only the expired one is swept').toBe(1);
        expect(await store.get('k1', 'resp_new')).toBeDefined();
        clock += 30_000;
        expect(await store.sweep(clock)).toBe(1);
        expect(await store.sweep(clock), 'nothing left').toBe(0);
      });

      it("over a key's cap, its oldest responses go first, never the one just put, and other keys keep theirs", async () => {
        const size = 1000;
        const store = await open({ maxBytesPerKey: 3 * size + 10 });
        for (const [i, id] of ['resp_1', 'resp_2', 'resp_3'].entries())
          await store.put(response(id, 'k1', clock + i, size));
        await store.put(response('resp_other', 'k2', clock, size));
        expect(await store.get('k1', 'resp_1'), 'three fit').toBeDefined();
        await store.put(response('resp_4', 'k1', clock + 3, size));
        expect(await store.get('k1', 'resp_1'), 'the oldest went').toBeUndefined();
        for (const id of ['resp_2', 'resp_3', 'resp_4']) expect(await store.get('k1', id), `${id} stays`).toBeDefined();
        await store.put(response('resp_big', 'k1', clock + 4, 2 * size));
        expect(await store.get('k1', 'resp_big'), 'the one just put stays').toBeDefined();
        expect(await store.get('k1', 'resp_2'), 'two more went for a double-size one').toBeUndefined();
        expect(await store.get('k1', 'resp_3')).toBeUndefined();
        expect(await store.get('k1', 'resp_4')).toBeDefined();
        expect(await store.get('k2', 'resp_other'), "another key's responses are not counted or dropped").toBeDefined();
      });

      it('a response bigger than the cap alone is not kept, and says so in the log, not to the client', async () => {
        const lines: string[] = [];
        const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(line) });
        const store = await open({ maxBytesPerKey: 500, logger });
        await store.put(response('resp_small', 'k1', clock, 300));
        await expect(store.put(response('resp_huge', 'k1', clock + 1, 800))).resolves.toBeUndefined();
        expect(await store.get('k1', 'resp_huge')).toBeUndefined();
        expect(await store.get('k1', 'resp_small'), 'what was kept stays').toBeDefined();
        expect(lines.join('')).toMatch(/"responseId":"resp_huge".*bigger than responses_max_per_key/);
      });

      it("finds a key's kept output items by id, for item_reference, and no other key's or expired ones", async () => {
        const store = await open({ ttlMs: 60_000 });
        const item = {
          id: 'msg_found',
          type: 'message',
          role: 'assistant',
          content: [{ type: 'output_text', text: 'x', annotations: [] }],
        };
        await store.put({
          ...response('resp_i', 'k1', clock),
          response: { id: 'resp_i', output: [item, { id: 'fc_1', type: 'function_call' }] },
        });
        expect(await store.findItems('k1', ['msg_found', 'msg_missing'])).toEqual(new Map([['msg_found', item]]));
        expect((await store.findItems('k2', ['msg_found'])).size, "another key's items are not found").toBe(0);
        expect(await store.findItems('k1', []), 'nothing asked, nothing found').toEqual(new Map());
        clock += 60_000;
        expect((await store.findItems('k1', ['msg_found'])).size, 'expired items are not found').toBe(0);
      });

      it('a deleted response takes its items with it', async () => {
        const store = await open();
        await store.put({
          ...response('resp_del', 'k1', clock),
          response: { id: 'resp_del', output: [{ id: 'msg_del', type: 'message' }] },
        });
        expect(await store.delete('k1', 'resp_del')).toBe(true);
        expect((await store.findItems('k1', ['msg_del'])).size).toBe(0);
      });

      it('two keys kept under one id keep apart: neither write, read, delete nor sweep of one touches the other', async () => {
        // Kept responses were keyed by id alone: an engine answering two keys with one id made the second key's write
        // take over the first key's row (its owner and its body).
        const store = await open({ ttlMs: 60_000 });
        const mine = {
          ...response('resp_same', 'k1', clock),
          response: { id: 'resp_same', object: 'response', output: [{ id: 'msg_same', type: 'message', text: 'k1' }] },
        };
        await store.put(mine);
        clock += 1_000;
        const theirs = {
          ...response('resp_same', 'k2', clock),
          response: { id: 'resp_same', object: 'response', output: [{ id: 'msg_same', type: 'message', text: 'k2' }] },
        };
        await store.put(theirs);
        expect(await store.get('k1', 'resp_same'), "k1's answer is unchanged by k2's").toEqual(mine);
        expect(await store.get('k2', 'resp_same')).toEqual(theirs);
        expect((await store.findItems('k1', ['msg_same'])).get('msg_same')).toMatchObject({ text: 'k1' });
        expect(await store.delete('k2', 'resp_same')).toBe(true);
        expect(await store.get('k1', 'resp_same'), "k2's delete leaves k1's").toEqual(mine);
        expect((await store.findItems('k1', ['msg_same'])).size, "and k1's items").toBe(1);
        await store.put(theirs);
        clock += 59_500;
        expect(await store.sweep(clock), "only k1's, older, expired").toBe(1);
        expect(await store.get('k2', 'resp_same'), "k1's sweep leaves k2's").toEqual(theirs);
        expect((await store.findItems('k2', ['msg_same'])).size, "and k2's items").toBe(1);
      });

      it("finds a response by the engine's id it replaced, for its own key only", async () => {
        // A client that has an engine's id (an answer too big for the router to replace it in) still continues from it.
        const store = await open();
        const kept = { ...response('resp_own1', 'k1', clock), engineId: 'resp_engine' };
        await store.put(kept);
        expect(await store.get('k1', 'resp_engine')).toEqual(kept);
        expect(await store.get('k1', 'resp_own1')).toEqual(kept);
        expect(await store.get('k2', 'resp_engine'), "another key's engine id reads as unknown").toBeUndefined();
        expect(await store.delete('k2', 'resp_engine')).toBe(false);
        expect(await store.delete('k1', 'resp_engine'), 'deleted by the engine id').toBe(true);
        expect(await store.get('k1', 'resp_own1')).toBeUndefined();
      });

      it('putting the same response again replaces it', async () => {
        const store = await open();
        await store.put(response('resp_r', 'k1', clock));
        const again = { ...response('resp_r', 'k1', clock), items: ['second'] };
        await store.put(again);
        expect((await store.get('k1', 'resp_r'))?.items).toEqual(['second']);
      });
    },
  );
}

describe('overCap', () => {
  const rows = [
    { id: 'new', bytes: 5 },
    { id: 'b', bytes: 3 },
    { id: 'c', bytes: 3 },
    { id: 'd', bytes: 1 },
  ];
  const cases: Array<[string, number, string, string[]]> = [
    ['all fit', 12, 'new', []],
    ['the oldest go first', 11, 'new', ['d']],
    [
      'an older one that would fit after a dropped one still goes: the cap drops from the old end',
      9,
      'new',
      ['c', 'd'],
    ],
    ['the one just put stays even when it alone fills the cap', 5, 'new', ['b', 'c', 'd']],
    ['the kept one is counted first wherever it sits', 8, 'c', ['b', 'd']],
  ];
  it.each(cases)('%s', (_name, cap, keep, want) => {
    expect(overCap(rows, keep, cap)).toEqual(want);
  });
  it("the tests' responses are the size they say", () => {
    expect(bytesOf(response('x', 'k', 0, 300))).toBe(300);
  });
});
