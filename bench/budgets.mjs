// How far a hard budget is overshot when two control planes spend it at once:
// 200 concurrent streams split over two planes, each plane spending leases it
// takes from one store (Postgres where LLMGW_TEST_POSTGRES names a server,
// else one SQLite file both open), with the background sync on its real
// timer. Each request is a chat whose prompt the engine counts as the sim
// does (a token per 4 characters): more than the prompt's least size (a
// token per 16 bytes), less than its most (prompt-text.ts). Admission holds
// the most, as the gateway does, and (--hold both, the default) in a second
// run on a fresh store the least, as it did before: side by side, the
// overshoot the upper bound removes. Prints what was spent against the
// amount and the bound (one lease per plane). Needs dist/ (npm run build).
//
//   node bench/budgets.mjs [--streams 200] [--amount 200000] [--lease 0.02] [--hold most|least|both] [--turns N: stop a stream after N admitted turns; default until refused for ~1 s]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import pino from 'pino';
import pg from 'pg';
import { Store } from '../dist/control/store/index.js';
import { BudgetLeases, StoredBudgetBook } from '../dist/control/budgets/index.js';
import { leastPromptTokens, mostPromptTokens } from '../dist/gateway/core/prompt-text.js';

const { values } = parseArgs({
  options: {
    streams: { type: 'string', default: '200' },
    amount: { type: 'string', default: '200000' },
    lease: { type: 'string', default: '0.02' },
    turns: { type: 'string', default: '1000000' },
    hold: { type: 'string', default: 'both' },
  },
});
const streams = Number(values.streams);
const amount = Number(values.amount);
const leaseFraction = Number(values.lease);
const turns = Number(values.turns);

if (!['most', 'least', 'both'].includes(values.hold)) throw new Error('--hold: want most, least or both');

/** Stream i's request: a chat whose prompt grows with i (13 to 125 tokens as the sim counts), asking for up to 64 tokens. */
function request(i) {
  const content = `Question ${i}: ${'tell me more about rivers and the sea. '.repeat(1 + (i % 12))}`;
  return { model: 'm', messages: [{ role: 'user', content }], max_tokens: 64 };
}

/** A fresh store, Postgres or SQLite, and how to remove it. */
async function openLocation() {
  if (process.env.LLMGW_TEST_POSTGRES) {
    const name = `llmgw_bench_${Date.now()}`;
    const admin = new pg.Client({ connectionString: process.env.LLMGW_TEST_POSTGRES });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${name}`);
    await admin.end();
    const url = new URL(process.env.LLMGW_TEST_POSTGRES);
    url.pathname = `/${name}`;
    const cleanup = async () => {
      const c = new pg.Client({ connectionString: process.env.LLMGW_TEST_POSTGRES });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    };
    return { location: { kind: 'postgres', url: url.href }, cleanup };
  }
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-bench-budgets-'));
  return {
    location: { kind: 'sqlite', path: join(dir, 'llmgw.db') },
    cleanup: async () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** One run: two planes spend the budget, holding the prompt's `hold` (most or least) size. */
async function run(hold) {
  const { location, cleanup } = await openLocation();
  const stores = [await Store.open({ location }), await Store.open({ location })];
  const budget = {
    id: 'bud_bench',
    scope: 'team',
    subject: 'bench',
    unit: 'tokens',
    period: 'day',
    amount,
    enforce: 'hard',
    alertAt: 1,
    createdAtMs: Date.now(),
    createdBy: 'bench',
  };
  await new StoredBudgetBook(stores[0].connection).create(budget);
  const planes = stores.map(
    (s) =>
      new BudgetLeases({
        book: new StoredBudgetBook(s.connection),
        prices: { cost: () => undefined },
        now: Date.now,
        logger: pino({ level: 'silent' }),
        leaseFraction,
        syncIntervalMs: 200,
      }),
  );
  for (const p of planes) await p.reload();
  const key = { id: 'key_bench', team: 'bench', requestsPerMinute: null, tokensPerMinute: null };

  let spent = 0;
  let admitted = 0;
  let refused = 0;
  let unsettled = 0;
  const started = Date.now();
  // Each stream sends until it has been refused for about a second in a row: by then the budget is spent, not
  // merely its plane's lease (a renewal comes every 200 ms while the store has more).
  async function stream(plane, i) {
    const body = request(i);
    const prompt = hold === 'most' ? mostPromptTokens('chat', body) : leastPromptTokens('chat', body);
    // What the engine counts: the sim's token per 4 characters.
    const counted = Math.ceil(body.messages[0].content.length / 4);
    let refusedInARow = 0;
    for (let t = 0; t < turns || refusedInARow > 0; t++) {
      if (refusedInARow >= 200) return;
      // A promise only when the lease ran dry and the request waits for its renewal or for holds to come back.
      const d = await plane.admit(key, 'm', prompt, body.max_tokens);
      if (!d.ok) {
        if (d.unsettled) unsettled++;
        else refused++;
        refusedInARow++;
        await new Promise((r) => setTimeout(r, 5));
        continue;
      }
      refusedInARow = 0;
      admitted++;
      // A stream's tokens arrive over a few milliseconds; it generates up to its max_tokens.
      await new Promise((r) => setTimeout(r, 1 + ((i + t) % 5)));
      const completion = 16 + ((i * 7 + t * 13) % 49);
      d.hold.settle('m', counted, completion);
      spent += counted + completion;
    }
  }
  await Promise.all(Array.from({ length: streams }, (_, i) => stream(planes[i % 2], i)));
  for (const p of planes) await p.close();
  for (const s of stores) await s.close();
  await cleanup();

  const lease = amount * leaseFraction;
  const over = spent - amount;
  return {
    store: location.kind,
    hold,
    streams,
    planes: 2,
    amount,
    lease,
    spent,
    overshoot: over,
    overshoot_in_leases: Number((over / lease).toFixed(3)),
    bound: 2 * lease,
    held: spent <= amount + 2 * lease,
    admitted,
    refused,
    unsettled,
    seconds: (Date.now() - started) / 1000,
  };
}

for (const hold of values.hold === 'both' ? ['most', 'least'] : [values.hold])
  console.log(JSON.stringify(await run(hold)));
