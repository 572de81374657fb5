// The usage of every command, and the one preamble that answers `--help` / `-h` and a missing or unknown
// verb before a command does anything (docs/api.md: `--help` on every command and subcommand prints its
// usage and exits 0, starting nothing; a wrong use prints it on stderr and exits 2).
import type { CliIo } from './command.js';

export interface VerbHelp {
  /** What follows `ambient-fhir <command> `, e.g. `show <username>`; several forms on several lines. */
  readonly synopsis: string;
  /** What the verb does, a few lines. */
  readonly about: string;
}

export interface CommandHelp {
  readonly name: string;
  /** A command without verbs: what follows `ambient-fhir <name> `. */
  readonly synopsis?: string;
  readonly verbs?: Readonly<Record<string, VerbHelp>>;
  /** Paragraphs printed after the synopsis (options, where it works, what it prints). */
  readonly about: string;
}

const HELP_FLAGS = new Set(['--help', '-h']);

/** `--help` or `-h` among the arguments (before a `--`, after which everything is an operand). */
export function asksForHelp(args: readonly string[]): boolean {
  const end = args.indexOf('--');
  return (end === -1 ? args : args.slice(0, end)).some((arg) => HELP_FLAGS.has(arg));
}

/** The usage of a command, or of one of its verbs. */
export function formatHelp(help: CommandHelp, verb?: string): string {
  const about = help.about.trim();
  const tail = about === '' ? '' : `\n${about}\n`;
  const verbHelp = verb !== undefined ? help.verbs?.[verb] : undefined;
  if (verbHelp) {
    const forms = verbHelp.synopsis.split('\n').map((form) => `ambient-fhir ${help.name} ${form}`);
    return `Usage: ${forms.join('\n       ')}\n\n${verbHelp.about.trim()}\n${tail}`;
  }
  if (!help.verbs) return `Usage: ambient-fhir ${help.name}${help.synopsis ? ` ${help.synopsis}` : ''}\n${tail}`;
  // Each verb's forms, then the first sentence of what it does.
  const list = Object.values(help.verbs)
    .map((v) => {
      const forms = v.synopsis.split('\n').map((form) => `  ${form}`);
      const first = v.about
        .trim()
        .replace(/\s+/g, ' ')
        .split(/(?<=\.)\s/)[0];
      return `${forms.join('\n')}\n      ${first}`;
    })
    .join('\n');
  return `Usage: ambient-fhir ${help.name} <verb> ...\n\n${list}\n\n"ambient-fhir ${help.name} <verb> --help" explains a verb.\n${tail}`;
}

/** Writes a wrong use (the problem, then the usage) on stderr; returns exit code 2. */
export function usageError(io: Pick<CliIo, 'stderr'>, help: CommandHelp, message: string, verb?: string): number {
  io.stderr.write(`${message}\n\n${formatHelp(help, verb)}`);
  return 2;
}

/**
 * The preamble every command runs first. Answers `--help` / `-h` (usage on stdout, 0) and, for a command
 * with verbs, `help [verb]`, a missing verb and an unknown one (stderr, 2). Returns undefined when the
 * command should go on.
 */
export function answerHelp(
  io: Pick<CliIo, 'stdout' | 'stderr'>,
  help: CommandHelp,
  args: readonly string[],
): number | undefined {
  if (!help.verbs) {
    if (!asksForHelp(args)) return undefined;
    io.stdout.write(formatHelp(help));
    return 0;
  }
  const [verb, ...rest] = args;
  if (verb === undefined) return usageError(io, help, `ambient-fhir ${help.name} needs a verb`);
  if (verb === 'help' || HELP_FLAGS.has(verb)) {
    const about = rest.find((arg) => help.verbs?.[arg]);
    io.stdout.write(formatHelp(help, about));
    return 0;
  }
  if (!Object.hasOwn(help.verbs, verb)) return usageError(io, help, `Unknown verb "${verb}"`);
  if (!asksForHelp(rest)) return undefined;
  io.stdout.write(formatHelp(help, verb));
  return 0;
}
