// How often the builtin engine writes a stream: the first event without
// waiting, later ones together at most once per interval, the end at once;
// and how streams at once share the engine's interval. The clock and the
// scheduler are the test's, so nothing depends on speed.
import type { ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { jsonTemplate, MAX_SHARED_STREAM_INTERVAL_MS, SseWriter, StreamPacer, type Schedule } from './sse.js';

function harness(intervalMs: number, pacer = new StreamPacer(intervalMs)) {
  let nowMs = 0;
  const due: { ms: number; fn: () => void; cancelled: boolean }[] = [];
  const schedule: Schedule = (ms, fn) => {
    const entry = { ms, fn, cancelled: false };
    due.push(entry);
    return () => {
      entry.cancelled = true;
    };
  };
  const writes: string[] = [];
  const heads: number[] = [];
  const closeListeners: (() => void)[] = [];
  const res = {
    destroyed: false,
    writableEnded: false,
    once(event: string, listener: () => void) {
      if (event === 'close') closeListeners.push(listener);
    },
    /** As node:http does when the client goes away (or after the end). */
    close() {
      this.destroyed = true;
      for (const listener of closeListeners.splice(0)) listener();
    },
    writeHead(status: number) {
      heads.push(status);
    },
    write(text: string) {
      writes.push(text);
    },
    end(text: string) {
      writes.push(text);
      this.writableEnded = true;
    },
  };
  const writer = new SseWriter(
    res as unknown as ServerResponse,
    () => [{ opening: true }],
    pacer,
    () => nowMs,
    schedule,
  );
  /** Runs what is due, in order, as the event loop would. */
  const run = () => {
    for (const entry of due.splice(0)) if (!entry.cancelled) entry.fn();
  };
  const events = (text: string) => [...text.matchAll(/^data: (.*)$/gm)].map((m) => m[1]);
  return { writer, res, writes, heads, due, run, events, at: (ms: number) => (nowMs = ms) };
}

describe('SseWriter', () => {
  it('writes the first event on the next turn, then at most one write per interval, and the end at once', () => {
    const h = harness(4);
    h.writer.send({ n: 1 });
    expect(h.writes, 'nothing inside the token callback').toEqual([]);
    expect(h.due.map((d) => d.ms)).toEqual([0]);
    h.run();
    expect(h.heads).toEqual([200]);
    expect(h.writes.map(h.events)).toEqual([['{"opening":true}', '{"n":1}']]);

    h.at(1);
    h.writer.send({ n: 2 });
    h.writer.send({ n: 3 });
    expect(
      h.due.map((d) => d.ms),
      'one write, due 4 ms after the last',
    ).toEqual([3]);
    h.at(4);
    h.run();
    expect(h.writes.slice(1).map(h.events)).toEqual([['{"n":2}', '{"n":3}']]);

    // Quiet for longer than the interval: the next event is not held.
    h.at(20);
    h.writer.send({ n: 4 });
    expect(h.due.map((d) => d.ms)).toEqual([0]);
    h.run();
    h.at(21);
    h.writer.send({ n: 5 });
    h.writer.done();
    expect(
      h.due.every((d) => d.cancelled),
      'the pending write was folded into the end',
    ).toBe(true);
    expect(h.writes.slice(2).map(h.events)).toEqual([['{"n":4}'], ['{"n":5}'], ['[DONE]']]);
  });

  it('with an interval of 0 writes every event on the next turn', () => {
    const h = harness(0);
    for (let n = 1; n <= 3; n++) {
      h.at(n / 10);
      h.writer.send({ n });
      expect(h.due.map((d) => d.ms)).toEqual([0]);
      h.run();
    }
    expect(h.writes.map(h.events)).toEqual([['{"opening":true}', '{"n":1}'], ['{"n":2}'], ['{"n":3}']]);
  });

  it('writes nothing after the client has gone', () => {
    const h = harness(4);
    h.writer.send({ n: 1 });
    h.res.destroyed = true;
    h.run();
    expect(h.writes).toEqual([]);
  });

  it('shares the interval with the other streams the engine is writing, up to the cap', () => {
    const pacer = new StreamPacer(4);
    const others = [pacer.join(), pacer.join(), pacer.join()];
    const h = harness(4, pacer);
    h.writer.send({ n: 1 });
    h.run();
    h.at(1);
    h.writer.send({ n: 2 });
    expect(
      h.due.map((d) => d.ms),
      'four streams: each writes once per 16 ms',
    ).toEqual([15]);
    h.at(16);
    h.run();
    for (let i = 0; i < 20; i++) others.push(pacer.join());
    h.at(17);
    h.writer.send({ n: 3 });
    expect(
      h.due.map((d) => d.ms),
      'however many streams, never held past the cap',
    ).toEqual([MAX_SHARED_STREAM_INTERVAL_MS - 1]);
    h.at(16 + MAX_SHARED_STREAM_INTERVAL_MS);
    h.run();
    for (const leave of others) leave();
    h.at(60);
    h.writer.send({ n: 4 });
    h.writer.send({ n: 5 });
    expect(
      h.due.map((d) => d.ms),
      'alone again: back to its own interval',
    ).toEqual([0]);
    expect(h.writes.map(h.events)).toEqual([['{"opening":true}', '{"n":1}'], ['{"n":2}'], ['{"n":3}']]);
  });

  it('counts a stream from its first event until its end or its client going away', () => {
    const pacer = new StreamPacer(4);
    const ended = harness(4, pacer);
    const gone = harness(4, pacer);
    expect(pacer.streamIntervalMs(), 'no stream yet').toBe(4);
    ended.writer.send({ n: 1 });
    gone.writer.send({ n: 1 });
    expect(pacer.streamIntervalMs()).toBe(8);
    ended.writer.done();
    ended.res.close();
    expect(pacer.streamIntervalMs(), 'the end and the close that follows count once').toBe(4);
    gone.res.close();
    const after = harness(4, pacer);
    after.writer.send({ n: 1 });
    expect(pacer.streamIntervalMs(), 'the client that went away is no longer counted').toBe(4);
    // A token that comes after the client went (generation stops a token late) must not count a stream that never ends.
    const late = harness(4, pacer);
    late.res.close();
    late.writer.send({ n: 1 });
    expect(pacer.streamIntervalMs(), 'a stream whose client had already gone is not counted').toBe(4);
  });

  it('a longer interval than the cap is kept, and 0 stays 0 however many stream', () => {
    const slow = new StreamPacer(100);
    slow.join();
    slow.join();
    expect(slow.streamIntervalMs()).toBe(100);
    const eager = new StreamPacer(0);
    eager.join();
    eager.join();
    expect(eager.streamIntervalMs()).toBe(0);
  });
});

describe('jsonTemplate', () => {
  const make = (text: string) => ({
    id: 'cmpl-1',
    model: 'm "quoted"',
    choices: [{ text, index: 0, logprobs: null, finish_reason: null }],
    usage: null,
  });

  it('writes exactly what JSON.stringify writes, whatever the text', () => {
    const render = jsonTemplate(make);
    for (const text of [
      '',
      'plain',
      'say "hi"\n',
      'back\\slash',
      '\u0000nul',
      'emoji 🙂 and \u2028',
      '{"json": [1, 2]}',
    ]) {
      expect(render(text)).toBe(JSON.stringify(make(text)));
    }
  });

  it('falls back to serialising whole when the hole is not found exactly once', () => {
    const twice = (text: string) => ({ a: text, b: text });
    expect(jsonTemplate(twice)('x"y')).toBe(JSON.stringify(twice('x"y')));
    const dropped = (text: string) => ({ length: text.length });
    expect(jsonTemplate(dropped)('abc')).toBe(JSON.stringify({ length: 3 }));
  });
});
