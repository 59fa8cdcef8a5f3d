// Guards against log lines that carry `part` twice ("part":"control",
// "part":"reconciler"): log tools disagree on which one wins, so a filter on
// part=control.reconciler silently matched nothing or everything.
import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { childLogger } from './index.js';

function capture(base: Record<string, unknown>): { logger: pino.Logger; lines: string[] } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      done();
    },
  });
  return { logger: pino({ base }, sink), lines };
}

const partKeys = (line: string): number => line.match(/"part":/g)?.length ?? 0;

describe('childLogger', () => {
  it("writes one part key, the parent's part and the child's joined by a dot", () => {
    const { logger, lines } = capture({ part: 'control' });
    childLogger(logger, 'reconciler').info('pass');
    expect(partKeys(lines[0]!), lines[0]).toBe(1);
    expect(JSON.parse(lines[0]!).part).toBe('control.reconciler');
  });

  it('nests as deep as the parts do, and keeps every other binding', () => {
    const { logger, lines } = capture({ part: 'up' });
    const agent = childLogger(childLogger(logger, 'control'), 'agent', { node: 'n1' });
    childLogger(agent, 'supervisor').info('started');
    expect(partKeys(lines[0]!), lines[0]).toBe(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ part: 'up.control.agent.supervisor', node: 'n1', msg: 'started' });
    expect(agent.bindings().part, 'the parent is left as it was').toBe('up.control.agent');
  });

  it("names just the child's part under a logger that has none", () => {
    const { logger, lines } = capture({});
    childLogger(logger, 'agent', { node: 'n1', part: 'ignored' }).info('hello');
    expect(partKeys(lines[0]!), lines[0]).toBe(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ part: 'agent', node: 'n1' });
  });
});
