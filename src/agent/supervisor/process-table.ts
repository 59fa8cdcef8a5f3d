// What the supervisor asks the operating system about processes: is this pid
// still the engine we started (its start time since boot, and its command
// line), is anyone left in its process group, and a signal to the whole group.
// Behind an interface so unit tests need no processes, and because it is the
// part that can kill the wrong thing: every group signal goes through the
// guards here.
import { readFileSync, readdirSync } from 'node:fs';
import { basename } from 'node:path';
import type { SupervisorClock } from './clock.js';

export interface ProcessIdentity {
  /**
   * Checkable against the live process: the boot id and the process's start
   * time in clock ticks since boot (/proc/<pid>/stat field 22). A reused pid
   * has another start time; a reboot another boot id.
   */
  readonly startToken: string;
  /** argv as the kernel holds it (/proc/<pid>/cmdline); an interpreter may come first. */
  readonly cmdline: readonly string[];
}

export interface ProcessTable {
  /** The identity of a living process; null when none has this pid, or it is a zombie. */
  identity(pid: number): ProcessIdentity | null;
  /** True while any process of the group lives (zombies do not count: they hold no GPU). */
  groupAlive(pgid: number): boolean;
  /** Sends `signal` to every process of the group; false when the group is gone or the pgid is refused. */
  signalGroup(pgid: number, signal: NodeJS.Signals): boolean;
  /**
   * Living group leaders whose environment sets `key`, with their whole
   * environment: how a supervisor finds engines it started whose records are
   * gone. Absent: this table cannot look (such engines are then not found).
   */
  marked?(key: string): MarkedProcess[];
}

export interface MarkedProcess {
  readonly pid: number;
  readonly pgid: number;
  readonly env: Readonly<Record<string, string>>;
}

/** The /proc/<pid>/stat fields after "(comm)": field 3 (state) is index 0, field 5 (pgrp) index 2, field 22 (starttime) index 19. */
function statFields(text: string): string[] | null {
  const close = text.lastIndexOf(')');
  if (close === -1) return null;
  return text.slice(close + 2).split(' ');
}

function readStat(procRoot: string, pid: number | string): string[] | null {
  try {
    return statFields(readFileSync(`${procRoot}/${pid}/stat`, 'utf8'));
  } catch {
    return null;
  }
}

const DEAD_STATES = new Set(['Z', 'X', 'x']);

/**
 * The process table of this Linux machine, read from /proc. It never
 * signals process group 0 or 1, nor its own group: a supervisor bug must
 * not become `kill -TERM -1`.
 */
export function linuxProcessTable(procRoot = '/proc'): ProcessTable {
  let bootId = 'unknown-boot';
  try {
    bootId = readFileSync(`${procRoot}/sys/kernel/random/boot_id`, 'utf8').trim();
  } catch {
    // Without a boot id the start time still tells a reused pid apart within one boot.
  }
  const ownGroup = Number(readStat(procRoot, 'self')?.[2] ?? process.pid);

  const groupMembersAlive = (pgid: number): boolean => {
    let entries: string[];
    try {
      entries = readdirSync(procRoot);
    } catch {
      return true; // Cannot look: the kill(…, 0) answer stands.
    }
    for (const entry of entries) {
      if (!/^\d+$/.test(entry)) continue;
      const fields = readStat(procRoot, entry);
      if (fields && Number(fields[2]) === pgid && !DEAD_STATES.has(fields[0]!)) return true;
    }
    return false;
  };

  return {
    identity(pid) {
      const fields = readStat(procRoot, pid);
      if (!fields || DEAD_STATES.has(fields[0]!) || fields[19] === undefined) return null;
      let cmdline: string[];
      try {
        cmdline = readFileSync(`${procRoot}/${pid}/cmdline`, 'utf8').split('\0');
      } catch {
        return null;
      }
      if (cmdline.at(-1) === '') cmdline.pop();
      return { startToken: `${bootId}:${fields[19]}`, cmdline };
    },
    groupAlive(pgid) {
      if (!Number.isInteger(pgid) || pgid <= 1) return false;
      try {
        process.kill(-pgid, 0);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
        // EPERM: someone's group exists; ours would not say so.
      }
      return groupMembersAlive(pgid);
    },
    marked(key) {
      const found: MarkedProcess[] = [];
      let entries: string[] = [];
      try {
        entries = readdirSync(procRoot);
      } catch {
        return found;
      }
      const prefix = `${key}=`;
      for (const entry of entries) {
        if (!/^\d+$/.test(entry)) continue;
        const fields = readStat(procRoot, entry);
        // Leaders only: an engine's forked workers share its environment and its group.
        if (!fields || DEAD_STATES.has(fields[0]!) || Number(fields[2]) !== Number(entry)) continue;
        let raw: string;
        try {
          raw = readFileSync(`${procRoot}/${entry}/environ`, 'utf8');
        } catch {
          continue; // Another user's process, or gone: not one of ours.
        }
        if (!raw.includes(prefix)) continue;
        const env: Record<string, string> = {};
        for (const pair of raw.split('\0')) {
          const eq = pair.indexOf('=');
          if (eq > 0) env[pair.slice(0, eq)] = pair.slice(eq + 1);
        }
        if (env[key] !== undefined) found.push({ pid: Number(entry), pgid: Number(fields[2]), env });
      }
      return found;
    },
    signalGroup(pgid, signal) {
      if (!Number.isInteger(pgid) || pgid <= 1 || pgid === ownGroup) return false;
      try {
        process.kill(-pgid, signal);
        return true;
      } catch {
        return false;
      }
    },
  };
}

/**
 * Whether the kernel's command line is the one we started: our argv after the
 * executable must end it. The executable itself may differ, because a script
 * runs under its interpreter (`python3 /venv/bin/vllm serve …`) and a wrapper
 * may exec another (`node stand-in.mjs vllm serve …`).
 */
export function cmdlineMatches(argv: readonly string[], cmdline: readonly string[]): boolean {
  const program = argv[0];
  if (program === undefined) return false;
  const args = argv.slice(1);
  const offset = cmdline.length - args.length;
  // The program is named before its arguments (as itself, or as the script its interpreter runs).
  if (offset < 1) return false;
  return (
    args.every((arg, i) => cmdline[offset + i] === arg) &&
    cmdline.slice(0, offset).some((word) => sameProgram(program, word))
  );
}

function sameProgram(a: string, b: string): boolean {
  return basename(a) === basename(b);
}

/** How often a stop re-checks whether the group is gone. */
const GROUP_POLL_MS = 50;

export interface KillProcessGroupOptions {
  table: ProcessTable;
  clock: SupervisorClock;
  /** How long the group has after SIGTERM before SIGKILL; 0 sends SIGKILL at the first check. */
  stopGraceMs: number;
  /** How long to wait for the group to go after SIGKILL before calling it stuck. */
  killWaitMs: number;
  /** Called once, just before SIGKILL: the group outlived its grace period. Absent: nothing is said. */
  onSigkill?: () => void;
}

/**
 * The one way the supervisor ends a process group, for a shard it runs and
 * for an engine it found without a record alike: SIGTERM, SIGKILL after the
 * grace period. True once no process of the group is left; false when it
 * outlived SIGKILL too (a process stuck in the kernel), for the caller to
 * report.
 */
export async function killProcessGroup(pgid: number, options: KillProcessGroupOptions): Promise<boolean> {
  const { table, clock } = options;
  const waitGone = async (forMs: number): Promise<boolean> => {
    const deadline = clock.now() + forMs;
    for (;;) {
      if (!table.groupAlive(pgid)) return true;
      if (clock.now() >= deadline) return false;
      await clock.sleep(Math.min(GROUP_POLL_MS, deadline - clock.now()));
    }
  };
  if (!table.groupAlive(pgid)) return true;
  table.signalGroup(pgid, 'SIGTERM');
  if (await waitGone(options.stopGraceMs)) return true;
  options.onSigkill?.();
  table.signalGroup(pgid, 'SIGKILL');
  return waitGone(options.killWaitMs);
}
