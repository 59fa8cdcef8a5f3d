import { describe, expect, it } from 'vitest';
import type { NodeReport } from '../protocol/index.js';
import { ReportPolicy, sendFullReport } from './report-policy.js';

const report = (gpus: number): NodeReport => ({
  hostname: 'n',
  gpus: Array.from({ length: gpus }, (_, index) => ({ index, class: 'h100-80gb', problems: [] })),
});

describe('what a heartbeat says of the report', () => {
  const base = { hash: 'h1', heldHash: 'h1', asked: false, lastFullAtMs: 0, nowMs: 1000, refreshMs: 300_000 };

  it('sends only the hash while the control plane holds it, and the full report otherwise', () => {
    expect(sendFullReport(base), 'held, fresh, not asked: a keep-alive').toBe(false);
    expect(sendFullReport({ ...base, heldHash: null }), 'an older or restarted control plane holds nothing').toBe(true);
    expect(sendFullReport({ ...base, hash: 'h2' }), 'the report changed').toBe(true);
    expect(sendFullReport({ ...base, asked: true }), 'asked for it').toBe(true);
    expect(sendFullReport({ ...base, lastFullAtMs: null }), 'never sent in full').toBe(true);
    expect(sendFullReport({ ...base, nowMs: 300_000 }), 'the refresh is due').toBe(true);
  });

  it('follows the answers: full first, keep-alives while held, full again on change, on request and after a join', () => {
    const policy = new ReportPolicy(300_000);
    const first = policy.fields(report(8), 0);
    expect(first.report, 'the first heartbeat sends the report').toBeDefined();
    policy.answered(first, { report_hash: first.report_hash }, 0);
    const second = policy.fields(report(8), 5000);
    expect(second.report, 'the control plane holds it: a keep-alive').toBeUndefined();
    expect(second.report_hash).toBe(first.report_hash);
    policy.answered(second, { report_hash: first.report_hash }, 5000);

    const changed = policy.fields(report(7), 10_000);
    expect(changed.report, 'a GPU gone changes the hash: sent in full').toBeDefined();
    policy.answered(changed, { report_hash: changed.report_hash }, 10_000);

    const kept = policy.fields(report(7), 15_000);
    policy.answered(kept, { send_report: true }, 15_000);
    expect(policy.fields(report(7), 15_001).report, 'asked (a restarted control plane): sent in full').toBeDefined();

    policy.answered(changed, { report_hash: changed.report_hash }, 20_000);
    policy.reset();
    expect(policy.fields(report(7), 20_001).report, 'after a new join: sent in full').toBeDefined();
  });

  it('always sends an older control plane the full report: it never says what it holds', () => {
    const policy = new ReportPolicy();
    for (let t = 0; t < 5; t++) {
      const sent = policy.fields(report(1), t * 5000);
      expect(sent.report).toBeDefined();
      policy.answered(sent, {}, t * 5000);
    }
  });
});
