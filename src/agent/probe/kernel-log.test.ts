import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { explainFromKernelLog, normaliseBusId, parseKernelLog } from './kernel-log.js';

function fixture(path: string): string {
  return readFileSync(new URL(`./fixtures/${path}`, import.meta.url), 'utf8');
}

describe('parseKernelLog', () => {
  it('finds the double-bit ECC error and the row remap, and leaves out application faults', () => {
    const events = parseKernelLog(fixture('dmesg/xid-48-63-94-dbe-row-remap.txt'));
    const xids = new Set(events.map((e) => e.xid));
    expect([...xids].sort()).toEqual([48, 63, 94]);
    expect(new Set(events.map((e) => e.busId))).toEqual(new Set(['0000:19:00']));
  });

  it('explains by the most serious event: a DBE outranks the contained errors logged after it', () => {
    const events = parseKernelLog(fixture('dmesg/xid-48-63-94-dbe-row-remap.txt'));
    expect(explainFromKernelLog(events, '0000:19:00')).toBe(
      'the kernel log shows Xid 48 (uncorrectable (double-bit) ECC error) for GPU 0000:19:00',
    );
    expect(explainFromKernelLog(events, '0000:3b:00'), 'another GPU has nothing in the log').toBeNull();
  });

  it('reads the multi-line "fallen off the bus" message that carries no Xid', () => {
    expect(parseKernelLog(fixture('dmesg/fallen-off-the-bus-no-xid.txt'))).toEqual([
      { busId: '0000:b3:00', xid: null, meaning: 'fallen off the bus' },
    ]);
  });

  it('reads GSP timeouts from a log with call traces between them', () => {
    const events = parseKernelLog(fixture('dmesg/xid-119-gsp-rpc-timeout.txt'));
    expect(events.length).toBeGreaterThan(1);
    expect(events.every((e) => e.xid === 119 && e.busId === '0000:9b:00')).toBe(true);
  });

  it('reads a failed adapter initialisation', () => {
    const events = parseKernelLog('[   12.5] NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x22:0x56:884)\n');
    expect(events).toEqual([{ busId: '0000:01:00', xid: null, meaning: 'the driver failed to initialise it' }]);
  });

  it('finds nothing in an empty or unrelated log', () => {
    expect(parseKernelLog('')).toEqual([]);
    expect(explainFromKernelLog(parseKernelLog('[1.0] usb 1-1: new device\n'), null)).toBeNull();
  });
});

describe('normaliseBusId', () => {
  it('writes the address forms of nvidia-smi and the kernel alike', () => {
    expect(normaliseBusId('00000000:5D:00.0')).toBe('0000:5d:00');
    expect(normaliseBusId('GPU0000:07:00.0')).toBe('0000:07:00');
    expect(normaliseBusId('PCI:0000:19:00')).toBe('0000:19:00');
    expect(normaliseBusId('no address')).toBeNull();
  });
});
