// What every ctl command is handed: the client, the output, and the few
// facts about the terminal it must not look up for itself (is a person at it,
// has Ctrl-C been pressed), so commands stay testable without a terminal.
import type { AdminClient } from '../api/index.js';
import type { Output } from './render.js';

/** ctl's exit codes: scripts branch on these. */
export const EXIT = {
  ok: 0,
  /** The request failed, or the server refused it. */
  failed: 1,
  /** Unknown command or option, a missing argument, a file that is not a model definition. */
  usage: 2,
  /** Placement is impossible: explain found no fit, or add was refused because no known node could run the model. */
  noFit: 3,
} as const;

export interface CtlContext {
  client: AdminClient;
  out: Output;
  /** Writes a line to stderr. */
  warn(line: string): void;
  /** `-o json`: print the API's own JSON, nothing else, on stdout. */
  json: boolean;
  /** A person is at stdin, so destructive commands ask first. */
  interactive: boolean;
  /** Asks a yes/no question on the terminal; false unless the answer is y or yes. */
  confirm(question: string): Promise<boolean>;
  /** Waits `ms`; false when Ctrl-C ended the wait (and every later one): how --watch and drain --wait stop. */
  pause(ms: number): Promise<boolean>;
  /**
   * Ctrl-C is this command's from now on: it ends the next pause (or the
   * one in progress) instead of the process. pause() takes it by itself;
   * --watch takes it before its first render, which Ctrl-C may interrupt.
   */
  holdInterrupt(): void;
  /** Where a progress bar may draw; absent when stdout is not a terminal. */
  progressStream?: NodeJS.WritableStream;
}
