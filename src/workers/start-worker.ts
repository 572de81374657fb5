// How every worker thread of the server starts: from a module of its own, compiled with the rest (dist/)
// or, when the server runs from its sources (the tests, `node --import tsx src/main.ts`), its .ts source.
//
// Node 20 applies neither `--import tsx` nor the main thread's loader hooks to a worker, so a .ts worker
// registers tsx itself, through a one-line bootstrap. It registers tsx's CommonJS hook, not its ES module
// one, which on Node 20 starts one more thread per worker for its hooks: two workers were ready in
// 550-850 ms instead of 160-320. Even so, from the sources a worker costs about 75 ms more CPU than
// compiled (loading tsx and esbuild), and its modules run as CommonJS there (no top-level await in them).
// Compiled, a worker is a plain ES module file and tsx is not involved.
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { WorkerOptions } from 'node:worker_threads';

const FROM_SOURCES = import.meta.url.endsWith('.ts');

/**
 * Starts the worker module `entry`, named as compiled, beside its caller:
 * `startWorker(new URL('./read-worker.js', import.meta.url), { workerData })`.
 *
 * A worker takes none of the parent's Node options (`execArgv`), compiled or not: under
 * `--input-type=module` the bootstrap would be read as an ES module, `--import tsx` does not apply in a
 * worker anyway, and the server's V8 flags are the process's already.
 */
export function startWorker(entry: URL, options: Omit<WorkerOptions, 'eval' | 'execArgv'> = {}): Worker {
  if (!FROM_SOURCES) return new Worker(entry, { ...options, execArgv: [] });
  const source = fileURLToPath(entry).replace(/\.js$/, '.ts');
  // Resolved here: an evaluated worker resolves modules from the working directory, not from this file.
  const tsx = createRequire(import.meta.url).resolve('tsx/cjs/api');
  const bootstrap = `require(${JSON.stringify(tsx)}).register(); require(${JSON.stringify(source)});`;
  return new Worker(bootstrap, { ...options, eval: true, execArgv: [] });
}
