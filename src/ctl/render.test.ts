import { describe, expect, it } from 'vitest';
import {
  bytesOrUnknown,
  cleanForTerminal,
  errorText,
  fit,
  formatSeconds,
  jsonForTerminal,
  Output,
  sanitize,
  terminalText,
  visibleWidth,
} from './render.js';

function capture(tty: boolean, width?: number): { out: Output; text: () => string } {
  let text = '';
  return { out: new Output((s) => (text += s), { tty, ...(width ? { width } : {}) }), text: () => text };
}

describe('render', () => {
  it('never colours output that is not a terminal', () => {
    const { out } = capture(false);
    expect(out.state('failed')).toBe('failed');
    expect(out.table(['A'], [[out.state('ready')]])).not.toMatch(/\x1b\[/); // eslint-disable-line no-control-regex
    expect(capture(true).out.state('failed')).toMatch(/\x1b\[31m/); // eslint-disable-line no-control-regex
  });

  it('fits a table into the width by shrinking the widest column', () => {
    const { out } = capture(false, 40);
    const t = out.table(['NAME', 'SOURCE'], [['m', 'hf://organisation/a-long-repository-name-that-cannot-fit']]);
    for (const line of t.split('\n')) expect(visibleWidth(line)).toBeLessThanOrEqual(40);
    expect(fit([10, 50], 40)).toEqual([10, 30]);
    expect(fit([5, 5], 4), 'columns never shrink below their minimum').toEqual([5, 5]);
  });

  it('prints unknown as "-", never as zero', () => {
    expect(bytesOrUnknown(undefined)).toBe('-');
    expect(bytesOrUnknown(0)).toBe('0 B');
    expect(bytesOrUnknown(141 * 2 ** 30)).toBe('141 GiB');
    expect(bytesOrUnknown(1.5 * 2 ** 20)).toBe('1.5 MiB');
    expect(formatSeconds(-1)).toBe('-');
    expect(formatSeconds(192)).toBe('3m12s');
  });
});

// What a hostile node put in its hostname, labels, paths and errors: clear the
// screen, set the window title, write the clipboard (OSC 52), return the
// cursor and print a line that reads like ctl's own, an 8-bit CSI, DEL.
const ATTACK = 'h\x1b[2J\x1b[H\x1b]0;owned\x07\x1b]52;c;cm0gLXJmIH4=\x07\r\nreplica r-1 is healthy\x9b31m\x7f';

describe('terminal safety', () => {
  // Guards against ctl printing what nodes, engines and clients wrote raw: escape
  // sequences drove the operator's terminal and newlines forged lines.
  it('shows every control character of a one-line value as a visible escape', () => {
    expect(sanitize(ATTACK)).toBe(
      'h\\x1b[2J\\x1b[H\\x1b]0;owned\\x07\\x1b]52;c;cm0gLXJmIH4=\\x07\\r\\nreplica r-1 is healthy\\x9b31m\\x7f',
    );
    expect(sanitize('a\tb\x00c')).toBe('a\\tb\\x00c');
    expect(sanitize('gpu-01 NVIDIA H100 80GB HBM3 — ÄÖ 日本'), 'printable text, any script, is left alone').toBe(
      'gpu-01 NVIDIA H100 80GB HBM3 — ÄÖ 日本',
    );
    expect(sanitize(sanitize(ATTACK)), 'cleaning twice changes nothing').toBe(sanitize(ATTACK));
  });

  it('keeps newline and tab in multi-line text (an engine log) and escapes the rest', () => {
    expect(sanitize('INFO\tready\nnext\x1b[31m red\r', 'text')).toBe('INFO\tready\nnext\\x1b[31m red\\r');
  });

  it('cleans every string of an API answer, keys too, one line except the log and plan fields', () => {
    const answer = {
      node: {
        id: 'n1',
        hostname: ATTACK,
        labels: { [`k${ATTACK}`]: ATTACK },
        gpus: [{ problems: [ATTACK] }],
        free: 3,
        ok: true,
        none: null,
      },
      lines: ['a\tb', `x${ATTACK}`],
      explain: 'profile a: no fit\nprofile b: no fit',
    };
    const clean = cleanForTerminal(answer);
    const strings: string[] = [];
    const walk = (v: unknown): void => {
      if (typeof v === 'string') strings.push(v);
      else if (v && typeof v === 'object') {
        for (const [k, x] of Object.entries(v)) {
          strings.push(k);
          walk(x);
        }
      }
    };
    walk(clean);
    expect(strings.filter((x) => /[\x00-\x08\x0b-\x1f\x7f-\x9f]/.test(x))).toEqual([]); // eslint-disable-line no-control-regex
    expect(clean.node.hostname).not.toContain('\n');
    expect(Object.keys(clean.node.labels)[0]).not.toContain('\n');
    expect(clean.node.gpus[0]!.problems[0]).toBe(sanitize(ATTACK));
    expect(clean.node).toMatchObject({ free: 3, ok: true, none: null });
    expect(
      clean.lines,
      'a log line keeps its tabs; a newline inside one is shown, never printed as a line of its own',
    ).toEqual(['a\tb', `x${sanitize(ATTACK, 'log-line')}`]);
    expect(clean.lines[1], 'no newline survives inside a log line').not.toContain('\n');
    expect(clean.explain, 'the plan explanation spans lines').toBe('profile a: no fit\nprofile b: no fit');
    expect(answer.node.hostname, 'the answer itself is not changed').toBe(ATTACK);
  });

  it('lets through only its own colours when printing, nothing when colour is off', () => {
    const colour = capture(true);
    colour.out.line(`${colour.out.state('failed')} ${ATTACK}`);
    expect(colour.text()).toContain('\x1b[31mfailed\x1b[39m');
    // With colour on, an SGR sequence passes the writer (values were cleaned before); every other escape does not.
    expect(colour.text()).not.toMatch(/\x1b\[2J|\x1b\[H|\x1b\]|\x07|\r|\x9b|\x7f/); // eslint-disable-line no-control-regex
    const plain = capture(false);
    plain.out.line(`${plain.out.state('failed')} \x1b[31mred ${ATTACK}`);
    expect(plain.text()).not.toMatch(/[\x00-\x09\x0b-\x1f\x7f-\x9f]/); // eslint-disable-line no-control-regex
    expect(terminalText('a\tb\nc', { colors: false }), 'layout stays').toBe('a\tb\nc');
    // What cli-table3 leaves when it wraps coloured text in a narrow column: pieces of SGR, kept so columns line up.
    expect(terminalText('\x1b[1mL\x1b[2\x1b[22m \x1b[32 x\x1b\n', { colors: true })).toBe(
      '\x1b[1mL\x1b[2\x1b[22m \x1b[32 x\x1b\n',
    );
    expect(terminalText('\x1b[2J\x1b[H\x1b]52;c;x\x07\x1bc', { colors: true }), 'any other sequence is escaped').toBe(
      '\\x1b[2J\\x1b[H\\x1b]52;c;x\\x07\\x1bc',
    );
  });

  it('puts a cleaned value in a table cell on one line', () => {
    const { out } = capture(false);
    const table = out.table(['NODE', 'HOSTNAME'], [['n1', sanitize(ATTACK)]]);
    expect(table.split('\n')).toHaveLength(4);
    expect(table.split('\n').filter((l) => l.includes('replica r-1 is healthy'))).toEqual([
      expect.stringContaining('\\r\\nreplica r-1 is healthy'),
    ]);
  });

  it('clears the screen for --watch only at a terminal', () => {
    const tty = capture(true);
    tty.out.clearScreen();
    expect(tty.text()).toBe('\x1b[2J\x1b[H');
    const pipe = capture(false);
    pipe.out.clearScreen();
    expect(pipe.text()).toBe('');
  });

  it('writes -o json as the same JSON, with DEL and C1 escaped too', () => {
    const json = jsonForTerminal({ hostname: ATTACK });
    expect(json).not.toMatch(/[\x00-\x09\x0b-\x1f\x7f-\x9f]/); // eslint-disable-line no-control-regex
    expect(JSON.parse(json)).toEqual({ hostname: ATTACK });
    // A stream's JSON lines (events --watch -o json) too: valid JSON, one line each, nothing raw.
    const { out, text } = capture(true);
    out.jsonLine({ message: ATTACK });
    out.jsonLine(ATTACK);
    const lines = text().split('\n');
    expect(lines).toHaveLength(3);
    expect(lines.slice(0, 2).map((l) => JSON.parse(l) as unknown)).toEqual([{ message: ATTACK }, ATTACK]);
    expect(text()).not.toMatch(/[\x00-\x09\x0b-\x1f\x7f-\x9f]/); // eslint-disable-line no-control-regex
  });

  it("keeps a server message on several lines, each after the first indented, so none passes for ctl's own", () => {
    expect(errorText('model bad:\nprofile a: no fit\x1b]0;x\x07')).toBe(
      'model bad:\n  profile a: no fit\\x1b]0;x\\x07',
    );
  });
});
