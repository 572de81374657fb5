// node bin/ambient-fhir.js <command> ...: one entry for the server and the administrator's commands.
import type { CliIo, Command } from './command.js';
import { processIo, StartupError, UsageError } from './command.js';
import { createCommands } from './commands.js';
import { oneLine } from './failures.js';
import { VERSION } from '../version.js';

function overview(commands: Readonly<Record<string, Command>>): string {
  const list = Object.entries(commands)
    .map(([n, c]) => `  ${n.padEnd(10)} ${c.summary}`)
    .join('\n');
  return `Usage: ambient-fhir <command> [--help]\n       ambient-fhir --version\n\n${list}\n\n"ambient-fhir <command> --help" explains a command. Exit codes: 0 done, 1 refused or failed, 2 wrong usage.\n`;
}

/**
 * Runs a command and resolves to the exit code. A failure the command did not handle becomes one line on
 * stderr and exit 1 (a StartupError's line says what to fix; no stack trace for an operator to read).
 */
export async function runCli(argv: string[], io: CliIo = processIo()): Promise<number> {
  const commands = createCommands(io);
  const [name, ...args] = argv;
  if (name === undefined) {
    io.stderr.write(`ambient-fhir needs a command\n\n${overview(commands)}`);
    return 2;
  }
  if (name === '--version' || name === '-v') {
    // The package's version, as GET /fhir/metadata gives it in software.version.
    io.stdout.write(`${VERSION}\n`);
    return 0;
  }
  if (name === '--help' || name === '-h' || name === 'help') {
    const about = args[0] !== undefined && Object.hasOwn(commands, args[0]) ? commands[args[0]] : undefined;
    if (about) return about.run(['--help']);
    io.stdout.write(overview(commands));
    return 0;
  }
  const command = Object.hasOwn(commands, name) ? commands[name] : undefined;
  if (!command) {
    io.stderr.write(`Unknown command "${name}"\n\n${overview(commands)}`);
    return 2;
  }
  try {
    return await command.run(args);
  } catch (error) {
    if (error instanceof UsageError) {
      io.stderr.write(`${error.message}\n`);
      return 2;
    }
    io.stderr.write(
      `ambient-fhir ${name}: ${error instanceof StartupError ? error.message : `error: ${oneLine(error)}`}\n`,
    );
    return 1;
  }
}
