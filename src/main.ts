// The process entry: `node dist/main.js <command>` (bin/ambient-fhir.js) or, from source in tests,
// `node --import tsx src/main.ts <command>`.
import { runCli } from './cli/main.js';

process.exitCode = await runCli(process.argv.slice(2));
