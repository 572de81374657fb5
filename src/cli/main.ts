// node bin/ambient-fhir.js <command> ...: one entry for the server and the administrator's commands.
import { COMMANDS } from './commands.js';

export async function runCli(argv: string[]): Promise<number> {
  const [name, ...args] = argv;
  const command = name ? COMMANDS[name] : undefined;
  if (!command) {
    const list = Object.entries(COMMANDS)
      .map(([n, c]) => `  ${n.padEnd(10)} ${c.summary}`)
      .join('\n');
    process.stderr.write(`${name ? `Unknown command "${name}"\n\n` : ''}Usage: ambient-fhir <command>\n\n${list}\n`);
    return name ? 2 : 0;
  }
  return command.run(args);
}
