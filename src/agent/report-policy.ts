// What a heartbeat says of the node's report: the full report, or only its
// hash (a keep-alive). Separate from the agent's transport (agent.ts: URLs,
// deadlines, failover) because it is about content: the control plane's cost
// per heartbeat is mostly parsing the report, and an idle node's report does
// not change. The decision is a pure function; ReportPolicy keeps the little
// state it needs between heartbeats.
import { type NodeReport, reportHash } from '../protocol/index.js';

/** A full report is sent at least this often even while its hash holds, so that readings the hash rounds away (temperatures, exact free bytes) stay fresh. */
export const FULL_REPORT_REFRESH_MS = 5 * 60_000;

export interface ReportDecisionInput {
  /** The hash of the report as probed now. */
  hash: string;
  /** The hash the control plane said it holds in its last answer; null = none said (a restart, an older control plane, no answer yet). */
  heldHash: string | null;
  /** The last answer asked for the full report (send_report). */
  asked: boolean;
  /** When the last full report was answered, ms; null = never. */
  lastFullAtMs: number | null;
  nowMs: number;
  refreshMs: number;
}

/**
 * Whether this heartbeat carries the full report: unless the control plane
 * holds this very hash, did not ask for the report, and has had a full one
 * within refreshMs. An older control plane never says what it holds, so it
 * is always sent the full report.
 */
export function sendFullReport(input: ReportDecisionInput): boolean {
  if (input.asked || input.heldHash === null || input.heldHash !== input.hash) return true;
  return input.lastFullAtMs === null || input.nowMs - input.lastFullAtMs >= input.refreshMs;
}

/** The report fields of one heartbeat's body. */
export interface ReportFields {
  report?: NodeReport;
  report_hash: string;
}

export class ReportPolicy {
  private heldHash: string | null = null;
  private asked = false;
  private lastFullAtMs: number | null = null;

  constructor(private readonly refreshMs = FULL_REPORT_REFRESH_MS) {}

  /** What the next heartbeat says of `report`; hand the result back to answered() with the answer. */
  fields(report: NodeReport, nowMs: number): ReportFields {
    const hash = reportHash(report);
    const full = sendFullReport({
      hash,
      heldHash: this.heldHash,
      asked: this.asked,
      lastFullAtMs: this.lastFullAtMs,
      nowMs,
      refreshMs: this.refreshMs,
    });
    return full ? { report, report_hash: hash } : { report_hash: hash };
  }

  /** Takes in what the control plane answered to a heartbeat that carried `sent`. */
  answered(
    sent: ReportFields,
    answer: { send_report?: boolean | undefined; report_hash?: string | undefined },
    nowMs: number,
  ): void {
    this.heldHash = answer.report_hash ?? null;
    this.asked = answer.send_report === true;
    if (sent.report !== undefined) this.lastFullAtMs = nowMs;
  }

  /** Forgets what the control plane holds (a new join, another control plane): the next heartbeat sends the full report. */
  reset(): void {
    this.heldHash = null;
    this.asked = false;
  }
}
