export class UsageError extends Error {}

export interface Command {
  readonly summary: string;
  /** Runs the command; resolves to the process exit code. */
  run(args: string[]): Promise<number>;
}
