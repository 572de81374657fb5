// How far V8 lets the server's heap grow between full collections. Left to itself it grows the old
// space by up to 4x while memory is free: on the comparison workload the server's RSS reached 260-280 MB
// while 31 MB of its heap was live. Growing by 20% at a time kept it at 191-197 MB on the same workload
// (issue 13's target is 200 MB), with the server's CPU per request within the run-to-run noise
// (docs/benchmarks.md, "Memory").
import { setFlagsFromString } from 'node:v8';

export const HEAP_GROWING_PERCENT = 20;

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
