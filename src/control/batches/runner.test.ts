// The runner against a line whose run throws before any answer (its input
// file unreadable). Guards against such a line staying `running` under the
// runner's own lease, which its renew timer extended for as long as the
// process lived: the batch could then never complete, and ended `expired`.
import { mkdtempSync, readdirSync, rmSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { batchRow } from '../../../test/support/batch-records.js';
import { waitFor } from '../../../test/support/wait.js';
import { Store } from '../store/index.js';
import { BatchRepository, type BatchRow } from './batch-store.js';
import { FileContent } from './content.js';
import { FileRepository } from './files-store.js';
import { BatchRunner, type LineCall } from './runner.js';
import { openBatches } from './index.js';
import type { ApiKeyRecord, Router } from '../../gateway/index.js';
import { issueKey, MemoryKeyStore } from '../keys/index.js';
import { defaultTeam, MemoryTeams, TeamKeys } from '../teams/index.js';

const INPUT = `file-${'a'.repeat(32)}`;

function batch(now: number, keyId = 'anonymous'): BatchRow {
  return batchRow(now, { key_id: keyId, input_file_id: INPUT, total: 2 });
}

const body = (i: number) => ({ model: 'm', messages: [{ role: 'user', content: `q${i}` }] });
const line = (i: number) =>
  JSON.stringify({ custom_id: `c${i}`, method: 'POST', url: '/v1/chat/completions', body: body(i) });

/** A store in a fresh folder (removed after the test) on the clock `now`, with its batch repository. */
async function freshStore(
  dirs: string[],
  now: () => number,
): Promise<{ dir: string; store: Store; repo: BatchRepository }> {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-runner-'));
  dirs.push(dir);
  const store = await Store.open({ location: { kind: 'sqlite', path: join(dir, 'store.db') }, now });
  return { dir, store, repo: new BatchRepository(store.connection) };
}

/** Starts `runner`, waits until batch_1 completes, and stops it whatever happened. */
async function runToCompletion(runner: BatchRunner, repo: BatchRepository): Promise<void> {
  try {
    await runner.start();
    await waitFor('the batch to complete', async () =>
      (await repo.get('batch_1'))?.status === 'completed' ? true : undefined,
    );
  } finally {
    await runner.stop();
  }
}

describe('the batch runner', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  it('gives back a line whose run failed, and runs it once the input can be read', async () => {
    let now = 1_000_000;
    const { dir, store, repo } = await freshStore(dirs, () => now);
    await repo.create(batch(now), [
      { line: 1, customId: 'c1', model: 'm' },
      { line: 2, customId: 'c2', model: 'm' },
    ]);
    const content = new FileContent(join(dir, 'files'));
    const calls: string[] = [];
    const runner = new BatchRunner({
      batches: repo,
      content,
      pace: { slots: () => 2 },
      call: async (_key, _path, b) => {
        calls.push((b as { messages: { content: string }[] }).messages[0]!.content);
        return { status: 200, headers: {}, body: '{"ok":true}' };
      },
      leaseMs: 60_000,
      now: () => now,
      logger: pino({ level: 'silent' }),
      alone: true,
      tickMs: 20,
    });
    try {
      await runner.start();
      // No input file yet: both lines fail before a call, and go back to waiting rather than staying held.
      await waitFor('both lines given back', async () => {
        const c = await repo.counts('batch_1', now);
        return c.running === 0 && c.waiting === 2 ? true : undefined;
      });
      expect(calls).toEqual([]);
      await content.put(INPUT, Buffer.from(`${line(1)}\n${line(2)}\n`));
      now += 2000; // past the second's wait a given-back line is held to
      await waitFor('the batch to complete', async () =>
        (await repo.get('batch_1'))?.status === 'completed' ? true : undefined,
      );
      expect(calls.sort()).toEqual(['q1', 'q2']);
    } finally {
      await runner.stop();
      await store.close();
    }
  });

  // Guards against the runner's pass grouping every line of every active batch (counts()) each half second to learn
  // whether a batch has work left: that is a one-row question (anyOpen), and the costly count is the API's alone.
  it('ends a batch without counting its lines on any pass', async () => {
    const now = 1_000_000;
    const { dir, store, repo } = await freshStore(dirs, () => now);
    let counted = 0;
    const counts = repo.counts.bind(repo);
    repo.counts = (...args) => {
      counted += 1;
      return counts(...args);
    };
    await repo.create(batch(now), [
      { line: 1, customId: 'c1', model: 'm' },
      { line: 2, customId: 'c2', model: 'm' },
    ]);
    const content = new FileContent(join(dir, 'files'));
    await content.put(INPUT, Buffer.from(`${line(1)}\n${line(2)}\n`));
    const runner = new BatchRunner({
      batches: repo,
      content,
      pace: { slots: () => 1 },
      call: async () => ({ status: 200, headers: {}, body: '{}' }),
      leaseMs: 60_000,
      now: () => now,
      logger: pino({ level: 'silent' }),
      alone: true,
      tickMs: 20,
    });
    try {
      await runner.start();
      await waitFor('the batch to complete', async () =>
        (await repo.get('batch_1'))?.status === 'completed' ? true : undefined,
      );
      expect((await repo.get('batch_1'))!.completed).toBe(2);
      expect(counted).toBe(0);
    } finally {
      await runner.stop();
      await store.close();
    }
  });

  // Guards against output files orphaned on disk: a runner killed between renaming a batch's output and error files
  // into place and end() (the row that names them) left them there for good, and the next try wrote new ones beside.
  it('leaves no file that no row names when a try at ending the batch is lost', async () => {
    let now = 1_000_000;
    const { dir, store, repo } = await freshStore(dirs, () => now);
    await repo.create(batch(now), [
      { line: 1, customId: 'c1', model: 'm' },
      { line: 2, customId: 'c2', model: 'm' },
    ]);
    const content = new FileContent(join(dir, 'files'));
    await content.put(INPUT, Buffer.from(`${line(1)}\n${line(2)}\n`));
    // Line 1 is answered, line 2 refused: an output file and an error file.
    const call: LineCall = async (_key, _path, b) =>
      (b as { messages: { content: string }[] }).messages[0]!.content === 'q1'
        ? { status: 200, headers: {}, body: '{"ok":true}' }
        : { status: 400, headers: {}, body: '{"error":{"message":"no"}}' };
    const options = {
      content,
      pace: { slots: () => 2 },
      call,
      leaseMs: 60_000,
      now: () => now,
      logger: pino({ level: 'silent' }),
      alone: false,
      tickMs: 20,
    };
    // The first runner dies inside end(): its files are written, the row that names them never is.
    let died = false;
    const dying = Object.create(repo) as BatchRepository;
    dying.end = async () => {
      died = true;
      throw new Error('killed before the row was written');
    };
    const first = new BatchRunner({ ...options, batches: dying });
    await first.start();
    await waitFor('the first try at ending it', () => (died ? true : undefined));
    await first.stop();
    expect((await repo.get('batch_1'))!.status).toBe('finalizing');
    now += 61_000; // past its ending lease
    const second = new BatchRunner({ ...options, batches: repo });
    await runToCompletion(second, repo);
    const ended = (await repo.get('batch_1'))!;
    expect(ended).toMatchObject({ completed: 1, failed: 1 });
    expect(readdirSync(join(dir, 'files')).sort()).toEqual([INPUT, ended.output_file_id!, ended.error_file_id!].sort());
    expect((await content.read(ended.output_file_id!)).toString().trim().split('\n')).toHaveLength(1);
    await store.close();
  });

  // Guards against waits counted as failed tries: every claim counted an attempt, so a line the gateway had twice
  // answered 429 (busy, which docs/batches.md says is no failure) got one try at a 500 instead of three.
  it('counts only failed tries, not waits for a busy gateway, toward the three a 5xx gets', async () => {
    let now = 1_000_000;
    const { dir, store, repo } = await freshStore(dirs, () => now);
    await repo.create({ ...batch(now), total: 1 }, [{ line: 1, customId: 'c1', model: 'm' }]);
    const content = new FileContent(join(dir, 'files'));
    await content.put(INPUT, Buffer.from(`${line(1)}\n`));
    const answers = [429, 429, 503, 500, 502, 200];
    const seen: number[] = [];
    const runner = new BatchRunner({
      batches: repo,
      content,
      pace: { slots: () => 1 },
      call: async () => {
        const status = answers[seen.length] ?? 500;
        seen.push(status);
        return { status, headers: {}, body: status === 200 ? '{"ok":true}' : '{"error":{"message":"x"}}' };
      },
      leaseMs: 1e12,
      // Every look is a second later: a retried line's wait (a second without Retry-After) is over at the next.
      now: () => (now += 1000),
      logger: pino({ level: 'silent' }),
      alone: true,
      tickMs: 20,
    });
    await runToCompletion(runner, repo);
    expect(seen).toEqual([429, 429, 503, 500, 502, 200]);
    expect((await repo.get('batch_1'))!).toMatchObject({ completed: 1, failed: 0 });
    await store.close();
  });

  it('makes the third failed try the answer', async () => {
    let now = 1_000_000;
    const { dir, store, repo } = await freshStore(dirs, () => now);
    await repo.create({ ...batch(now), total: 1 }, [{ line: 1, customId: 'c1', model: 'm' }]);
    const content = new FileContent(join(dir, 'files'));
    await content.put(INPUT, Buffer.from(`${line(1)}\n`));
    let calls = 0;
    const runner = new BatchRunner({
      batches: repo,
      content,
      pace: { slots: () => 1 },
      call: async () => {
        calls += 1;
        return { status: 502, headers: {}, body: '{"error":{"message":"x"}}' };
      },
      leaseMs: 1e12,
      now: () => (now += 1000),
      logger: pino({ level: 'silent' }),
      alone: true,
      tickMs: 20,
    });
    let renewals = 0;
    const renew = repo.renew.bind(repo);
    repo.renew = (...args) => ((renewals += 1), renew(...args));
    await runToCompletion(runner, repo);
    expect(calls).toBe(3);
    expect((await repo.get('batch_1'))!).toMatchObject({ completed: 0, failed: 1 });
    // A lease of 1e12 ms would make a renewal timer of a third of it, which Node fires every millisecond: held to 24d.
    expect(renewals, 'no renewal within a lease far from its end').toBe(0);
    await store.close();
  });

  // Guards against batch lines running as the key's own record, outside its team's models and limits: the runner
  // once read keys with list(), which TeamKeys does not narrow, so a team's caps held for a client and not for its batch.
  it('runs a line as its key narrowed by the team', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-runner-'));
    dirs.push(dir);
    const now = 1_000_000;
    const store = await Store.open({ location: { kind: 'sqlite', path: join(dir, 'store.db') }, now: () => now });
    const teams = new MemoryTeams([
      defaultTeam(now),
      {
        name: 'ml',
        allowedModels: ['a'],
        requestsPerMinute: 60,
        tokensPerMinute: null,
        createdAtMs: now,
        createdBy: 'test',
        updatedAtMs: now,
      },
    ]);
    const keys = new TeamKeys(new MemoryKeyStore(), teams, (n) => n);
    const { record } = await issueKey(keys, { name: 'ci', team: 'ml', requestsPerMinute: 600 }, now, 'test');
    const batches = openBatches({
      store,
      settings: {
        filesDir: join(dir, 'files'),
        fileMaxBytes: 1 << 20,
        maxLines: 10,
        leaseMs: 60_000,
        minWindowMs: 1,
        headroomFraction: 0.5,
      },
      keys,
      now: () => now,
      logger: pino({ level: 'silent' }),
    })!;
    await new BatchRepository(store.connection).create({ ...batch(now, record.id), total: 1 }, [
      { line: 1, customId: 'c1', model: 'm' },
    ]);
    await new FileContent(join(dir, 'files')).put(INPUT, Buffer.from(`${line(1)}\n`));
    const seen: (ApiKeyRecord | null)[] = [];
    const router = {
      inProcess: {
        post: async (key: ApiKeyRecord | null) => {
          seen.push(key);
          return { status: 200, headers: {}, body: '{}' };
        },
      },
    } as unknown as Router;
    try {
      await batches.run(router, () => ({ slots: () => 1 }));
      await waitFor('the line to run', () => (seen.length > 0 ? true : undefined));
      expect(seen[0]).toMatchObject({ id: record.id, allowedModels: ['a'], requestsPerMinute: 60 });
    } finally {
      await batches.close();
      await store.close();
    }
  });

  // Guards against bytes a crash left in files_dir staying for good: openBatches sweeps them before its runner starts.
  it('sweeps files_dir of files no row names when the runner starts', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-runner-'));
    dirs.push(dir);
    const now = Date.now();
    const store = await Store.open({ location: { kind: 'sqlite', path: join(dir, 'store.db') }, now: () => now });
    const filesDir = join(dir, 'files');
    const content = new FileContent(filesDir);
    const kept = `file-${'b'.repeat(32)}`;
    const orphan = `file-${'c'.repeat(32)}`;
    await content.put(kept, Buffer.from('kept\n'));
    await content.put(orphan, Buffer.from('lost\n'));
    await new FileRepository(store.connection).insert({
      id: kept,
      owner: 'anonymous',
      purpose: 'batch',
      filename: 'in.jsonl',
      bytes: 5,
      lines: 1,
      createdAtMs: now,
    });
    const old = (now - 2 * 3_600_000) / 1000;
    for (const f of [kept, orphan]) utimesSync(join(filesDir, f), old, old);
    const batches = openBatches({
      store,
      settings: {
        filesDir,
        fileMaxBytes: 1 << 20,
        maxLines: 10,
        leaseMs: 60_000,
        minWindowMs: 1,
        headroomFraction: 0.5,
      },
      keys: new TeamKeys(new MemoryKeyStore(), new MemoryTeams([defaultTeam(now)]), (n) => n),
      now: () => now,
      logger: pino({ level: 'silent' }),
    })!;
    try {
      await batches.run({} as Router, () => ({ slots: () => 0 }));
      expect(readdirSync(filesDir)).toEqual([kept]);
    } finally {
      await batches.close();
      await store.close();
    }
  });
});
