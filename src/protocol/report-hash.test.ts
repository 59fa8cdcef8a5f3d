import { describe, expect, it } from 'vitest';
import type { NodeReport } from './node-report.js';
import { canonicalJson, reportHash } from './report-hash.js';

const GiB = 2 ** 30;

function report(): NodeReport {
  return {
    hostname: 'gpu-1',
    cpu_count: 64,
    memory_total_bytes: 512 * GiB,
    memory_available_bytes: 400 * GiB + 12345,
    gpus: [
      {
        index: 0,
        uuid: 'GPU-a',
        class: 'h100-80gb',
        memory_total_mib: 81559,
        memory_used_mib: 10,
        temperature_c: 31,
        problems: [],
      },
    ],
    disks: [{ mount_point: '/data', shared: false, free_bytes: 900 * GiB + 5, total_bytes: 1000 * GiB, paths: [] }],
    weights: [{ path: '/data/c/x', kind: 'cache', cache_name: 'x', last_used_ms: 1_700_000_000_000 }],
    engines: [{ name: 'vllm', version: '0.11.1' }],
  };
}

describe('report hash', () => {
  it('is the same for the same content whatever the key order', () => {
    const a = report();
    const b = Object.fromEntries(Object.entries(report()).reverse()) as NodeReport;
    expect(reportHash(b), 'key order is not content').toBe(reportHash(a));
    expect(reportHash(a)).toMatch(/^[0-9a-f]{32}$/);
    expect(canonicalJson({ b: 1, a: [{ d: undefined, c: 2 }] })).toBe('{"a":[{"c":2}],"b":1}');
  });

  it("keeps one hash while an idle node's readings move a little", () => {
    const idle = report();
    idle.memory_available_bytes! += 1000;
    idle.gpus![0]!.temperature_c = 35;
    idle.gpus![0]!.memory_used_mib = 20;
    idle.disks![0]!.free_bytes! += 1000;
    idle.weights![0]!.last_used_ms! += 1;
    expect(reportHash(idle), 'an idle node would otherwise send its full report at every heartbeat').toBe(
      reportHash(report()),
    );
  });

  it('changes with anything placement decides on', () => {
    const base = reportHash(report());
    const changes: [string, (r: NodeReport) => void][] = [
      ['a GPU problem', (r) => r.gpus![0]!.problems.push('uncorrected ECC errors')],
      ['a GPU gone', (r) => r.gpus!.pop()],
      ['a GiB of disk', (r) => (r.disks![0]!.free_bytes! -= GiB)],
      ['a GiB of memory', (r) => (r.memory_available_bytes! -= GiB)],
      ['new weights', (r) => r.weights!.push({ path: '/data/c/y', kind: 'cache', cache_name: 'y' })],
      ['an engine', (r) => r.engines!.push({ name: 'sglang' })],
      ['a fabric', (r) => (r.fabrics = [{ name: 'ib0', address: '10.0.0.1' }])],
      ['GPU memory in use, by a GiB', (r) => (r.gpus![0]!.memory_used_mib = 2048)],
    ];
    for (const [what, change] of changes) {
      const r = report();
      change(r);
      expect(reportHash(r), `${what} must change the hash`).not.toBe(base);
    }
  });

  it('tells an unknown reading from a zero one', () => {
    const unknown = report();
    delete unknown.memory_available_bytes;
    const zero = report();
    zero.memory_available_bytes = 0;
    expect(reportHash(unknown)).not.toBe(reportHash(zero));
  });
});
