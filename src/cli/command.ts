import type { CommandHelp } from './usage.js';

/** A wrong use of a command: its message and the usage go to stderr, and the exit code is 2. */
export class UsageError extends Error {}

/**
 * A command could not start or do its work for a reason outside it (configuration, database, port, files):
 * the message is the one line printed, and the exit code is 1. No stack trace: the line says what to fix.
 */
export class StartupError extends Error {}

/** Where a command reads and writes; tests pass their own streams and environment. */
export interface CliIo {
  readonly stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  readonly stdout: { write(text: string): unknown };
  readonly stderr: { write(text: string): unknown; isTTY?: boolean };
  readonly env: Record<string, string | undefined>;
}

export function processIo(): CliIo {
  return { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr, env: process.env };
}

export interface Command {
  readonly summary: string;
  /** Its usage: `--help` prints it (stdout, exit 0), a wrong use prints it after the problem (stderr, exit 2). */
  readonly help: CommandHelp;
  /** Runs the command; resolves to the process exit code. */
  run(args: string[]): Promise<number>;
}
