// V8's heap sizing for the long-running commands (serve, import). Left to itself V8 grows the old
// space by up to 4x while memory is free (RSS 260-280 MB on the comparison workload with 31 MB live;
// 191-197 MB at 20%), and sizes the young generation from the machine's memory: two semi-spaces of
// 16 MB on Node 20, of 64 MB on Node 24, where 350 distinct searches took a server from 199 to 336 MB
// (8 MB: 196 to 238 MB, at the same CPU per request: docs/benchmarks.md, "Memory").
import { setFlagsFromString } from 'node:v8';

export const HEAP_GROWING_PERCENT = 20;
export const MAX_SEMI_SPACE_MB = 8;
/** The commands that hold a server's worth of memory for long: the young generation is capped for them. */
export const LONG_RUNNING_COMMANDS: readonly (string | undefined)[] = ['serve', 'import'];

/**
 * Whether the operator chose the growth (`node --heap-growing-percent=N bin/ambient-fhir.js serve`; node
 * does not take the flag from NODE_OPTIONS): their choice then stands.
 */
export function heapGrowthChosen(execArgv: readonly string[]): boolean {
  return execArgv.some((arg) => /^--heap[-_]growing[-_]percent\b/.test(arg));
}

/** Sets the server's heap growth, unless the operator did. */
export function limitHeapGrowth(): void {
  if (heapGrowthChosen(process.execArgv)) return;
  setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
}

/** Whether the node flags (command line or NODE_OPTIONS) already size the young generation. */
export function youngGenerationChosen(execArgv: readonly string[], nodeOptions = ''): boolean {
  return [...execArgv, ...nodeOptions.split(/\s+/)].some((arg) => /^--(max|min)[-_]semi[-_]space[-_]size\b/.test(arg));
}

/** The node command line that runs this process again with the young generation capped. */
export function cappedCommandLine(execPath: string, execArgv: readonly string[], argv: readonly string[]): string[] {
  return [execPath, `--max-semi-space-size=${MAX_SEMI_SPACE_MB}`, ...execArgv, ...argv.slice(1)];
}

/**
 * V8 reads the young generation's size only when a thread's heap is created, so the main thread's cap
 * must be a node flag: unless the operator sized it, this process replaces itself (same pid, stdio,
 * environment; nothing has been opened yet) with one started with the flag. Node 20 has no
 * `process.execve`; it runs as started, as `npm start` passes the flag.
 */
export function capYoungGeneration(): void {
  const execve = (process as { execve?: (file: string, args: string[], env: NodeJS.ProcessEnv) => never }).execve;
  if (typeof execve !== 'function' || youngGenerationChosen(process.execArgv, process.env.NODE_OPTIONS)) return;
  execve(process.execPath, cappedCommandLine(process.execPath, process.execArgv, process.argv), process.env);
}
