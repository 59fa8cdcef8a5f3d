// When a crashed engine is started again, and when the supervisor gives up.
// Its own small object so the numbers are chosen in one place, tested
// without processes, and every decision comes with a sentence saying why
// ("restart 3 in 4.1s: 3 failures in a row; backoff 1s ×2 each, at most
// 2m"), which goes into the shard's log line and status.
import { LlmgwError } from '../../errors/index.js';
import { nearestName } from '../../units/index.js';
import { formatElapsedMs } from './elapsed.js';

export interface RestartPolicyOptions {
  /** Delay before the first restart after a failure. Absent: 1000. 0: restart at once. */
  baseDelayMs?: number;
  /** Each further failure in a row multiplies the delay by this. Absent: 2. 1: a constant delay. */
  factor?: number;
  /** No delay is longer than this, jitter included. Absent: 120000 (2 min). */
  maxDelayMs?: number;
  /**
   * Each delay is moved by up to this share, up or down, so engines that
   * crashed together (a shared driver fault) do not restart together.
   * Absent: 0.2. 0: exact delays.
   */
  jitterRatio?: number;
  /** A run at least this long counts as stable: the next failure starts the backoff over. Absent: 600000 (10 min). */
  stableAfterMs?: number;
  /** Failures in a row after which the shard stays failed. Absent or 0: never give up (the control plane decides). */
  maxConsecutiveFailures?: number;
  /** Uniform in [0, 1), for the jitter. Absent: Math.random. Tests pass a seeded one. */
  random?: () => number;
}

export interface CompiledRestartPolicyOptions {
  readonly baseDelayMs: number;
  readonly factor: number;
  readonly maxDelayMs: number;
  readonly jitterRatio: number;
  readonly stableAfterMs: number;
  /** 0 = never give up. */
  readonly maxConsecutiveFailures: number;
  readonly random: () => number;
}

const OPTION_KEYS = [
  'baseDelayMs',
  'factor',
  'maxDelayMs',
  'jitterRatio',
  'stableAfterMs',
  'maxConsecutiveFailures',
  'random',
] as const;

export function compileRestartPolicyOptions(options: RestartPolicyOptions = {}): CompiledRestartPolicyOptions {
  const problems: string[] = [];
  for (const key of Object.keys(options)) {
    if ((OPTION_KEYS as readonly string[]).includes(key)) continue;
    const near = nearestName(key, OPTION_KEYS);
    problems.push(`restart policy option "${key}" is unknown${near ? `; did you mean "${near}"?` : ''}`);
  }
  const number = (
    key: Exclude<(typeof OPTION_KEYS)[number], 'random'>,
    fallback: number,
    ok: (n: number) => boolean,
    want: string,
  ): number => {
    const value = options[key] ?? fallback;
    if (typeof value !== 'number' || !Number.isFinite(value) || !ok(value)) {
      problems.push(`restart policy ${key} must be ${want}; got ${JSON.stringify(value)}`);
      return fallback;
    }
    return value;
  };
  const compiled: CompiledRestartPolicyOptions = {
    baseDelayMs: number('baseDelayMs', 1000, (n) => n >= 0, 'a number of milliseconds, 0 or more'),
    factor: number('factor', 2, (n) => n >= 1, 'a multiplier of 1 or more'),
    maxDelayMs: number('maxDelayMs', 120_000, (n) => n >= 0, 'a number of milliseconds, 0 or more'),
    jitterRatio: number('jitterRatio', 0.2, (n) => n >= 0 && n <= 1, 'a share from 0 to 1'),
    stableAfterMs: number('stableAfterMs', 600_000, (n) => n > 0, 'a number of milliseconds above 0'),
    maxConsecutiveFailures: number(
      'maxConsecutiveFailures',
      0,
      (n) => Number.isInteger(n) && n >= 0,
      'a whole number, 0 or more',
    ),
    random: options.random ?? Math.random,
  };
  if (problems.length > 0) throw new LlmgwError('LLMGW_CONFIG_INVALID', problems.join('; '));
  return compiled;
}

export type RestartDecision =
  | { readonly restart: true; readonly delayMs: number; readonly consecutiveFailures: number; readonly reason: string }
  | { readonly restart: false; readonly consecutiveFailures: number; readonly reason: string };

export class RestartPolicy {
  readonly options: CompiledRestartPolicyOptions;

  constructor(options: RestartPolicyOptions = {}) {
    this.options = compileRestartPolicyOptions(options);
  }

  /**
   * What to do after a failure. `previousFailures` is the count of failures
   * in a row before this one; `uptimeMs` how long the failed run lasted (0
   * for one that never started).
   */
  decide(previousFailures: number, uptimeMs: number): RestartDecision {
    const { baseDelayMs, factor, maxDelayMs, jitterRatio, stableAfterMs, maxConsecutiveFailures, random } =
      this.options;
    const stable = uptimeMs >= stableAfterMs;
    const failures = (stable ? 0 : previousFailures) + 1;
    const inARow = failures === 1 ? 'the first failure' : `${failures} failures in a row`;
    if (maxConsecutiveFailures > 0 && failures > maxConsecutiveFailures) {
      return {
        restart: false,
        consecutiveFailures: failures,
        reason: `not restarted: ${inARow}, and the policy gives up after ${maxConsecutiveFailures}`,
      };
    }
    const backoff = Math.min(maxDelayMs, baseDelayMs * factor ** (failures - 1));
    const jittered = backoff * (1 + jitterRatio * (2 * random() - 1));
    const delayMs = Math.round(Math.min(maxDelayMs, Math.max(0, jittered)));
    const why = stable ? `it had run ${formatElapsedMs(uptimeMs)}, long enough to start the backoff over` : inARow;
    return {
      restart: true,
      delayMs,
      consecutiveFailures: failures,
      reason: `restart in ${formatElapsedMs(delayMs)}: ${why}; backoff ${formatElapsedMs(baseDelayMs)} ×${factor} each, at most ${formatElapsedMs(maxDelayMs)}`,
    };
  }
}
