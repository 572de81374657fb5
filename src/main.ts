// The process entry: `node dist/main.js <command>` (bin/ambient-fhir.js) or, from source in tests,
// `node --import tsx src/main.ts <command>`.
import { capYoungGeneration, LONG_RUNNING_COMMANDS } from './cli/heap.js';

// First of all, before any module of the command is loaded: it may start this process again.
if (LONG_RUNNING_COMMANDS.includes(process.argv[2])) capYoungGeneration();
const { runCli } = await import('./cli/main.js');
process.exitCode = await runCli(process.argv.slice(2));
