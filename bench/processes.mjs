// What the benchmarks and the soak share: running the CLI, the server's command line, finding a free port,
// starting a server, PostgreSQL's pid, a fresh database, the bench account and a client of it, the usage
// (a script's header comment) and the commit measured.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

/** The PostgreSQL the benchmarks use: AMBIENT_BENCH_POSTGRES_URL, or the local server's `test` database. */
export const POSTGRES_URL = process.env.AMBIENT_BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/**
 * node's arguments for the server as `npm start` runs it (package.json), so that every benchmark measures
 * the server with the node flags it ships with (the young generation's size: docs/deploy.md, "Node and memory");
 * `extra` follows `serve`.
 */
export function serveArgs(root, extra = []) {
  const start = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).scripts.start;
  const words = start.trim().split(/\s+/);
  const bin = words.indexOf('bin/ambient-fhir.js');
  if (words[0] !== 'node' || bin < 0 || words[bin + 1] !== 'serve')
    throw new Error(`npm start is not "node ... serve": ${start}`);
  return [...words.slice(1, bin), join(root, 'bin', 'ambient-fhir.js'), 'serve', ...words.slice(bin + 2), ...extra];
}

/**
 * Runs a command to completion; resolves with its output, rejects (with the output) on a non-zero exit.
 * `stderr: 'inherit'`: its stderr (progress) goes to this process's as it comes, and the output is its stdout.
 */
export function run(command, args, { env = {}, input, stderr = 'pipe' } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', stderr] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr?.on('data', (d) => (out += d));
    child.on('exit', (code) =>
      code === 0 ? resolve(out) : reject(new Error(`${command} ${args.join(' ')} exited ${code}:\n${out}`)),
    );
    child.stdin.end(input ?? '');
  });
}

/** A TCP port nobody listens on right now. */
export function freePort() {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** Resolves once the server at `url` answers GET /readyz (its database reachable); throws after 30 s. */
export async function waitReady(url) {
  for (let i = 0; i < 300; i++) {
    try {
      if ((await fetch(`${url}/readyz`)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('server did not become ready');
}

/**
 * The server as `npm start` runs it, on a free port of 127.0.0.1, with `env` beside the process's own;
 * resolves once it is ready. `nodeArgs` go before npm start's own (a profiler's flags). `stop` sends
 * SIGTERM and resolves when it has exited (at once if it has already).
 */
export async function startServer(root, env, { nodeArgs = [] } = {}) {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const server = spawn(process.execPath, [...nodeArgs, ...serveArgs(root)], {
    env: { ...process.env, ...env, PORT: String(port), AMBIENT_PUBLIC_URL: url },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  try {
    await waitReady(url);
  } catch (error) {
    server.kill('SIGTERM');
    throw error;
  }
  return {
    url,
    pid: server.pid,
    stop: () => {
      if (server.exitCode !== null || server.signalCode !== null) return Promise.resolve();
      server.kill('SIGTERM');
      return new Promise((r) => server.on('exit', r));
    },
  };
}

/** The PostgreSQL postmaster's pid, so that a benchmark can report the database's CPU too; undefined where unreadable. */
export function postgresPid() {
  const dir = '/var/run/postgresql';
  try {
    const pidFile = readdirSync(dir).find((f) => f.endsWith('.pid'));
    return pidFile ? readFileSync(join(dir, pidFile), 'utf8').split('\n')[0].trim() : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A fresh, empty database: a new temporary SQLite file (`path`), or the PostgreSQL schema `schema` of
 * POSTGRES_URL, recreated. `dispose` removes the SQLite file; the schema stays until the next run.
 */
export async function freshDatabase(backend, schema) {
  if (backend === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), `ambient-${schema}-`));
    const path = join(dir, `${schema}.db`);
    return { url: `sqlite:${path}`, path, dispose: () => rmSync(dir, { recursive: true, force: true }) };
  }
  const client = new pg.Client({ connectionString: POSTGRES_URL });
  await client.connect();
  await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await client.query(`CREATE SCHEMA ${schema}`);
  await client.end();
  const url = new URL(POSTGRES_URL);
  url.searchParams.set('options', `-c search_path=${schema}`);
  return { url: url.toString(), dispose: () => undefined };
}

/**
 * `backends` without `postgres` when POSTGRES_URL does not answer (saying so): a bare machine still runs
 * the SQLite part.
 */
export async function reachableBackends(backends) {
  if (!backends.includes('postgres')) return backends;
  const client = new pg.Client({ connectionString: POSTGRES_URL, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    return backends;
  } catch (error) {
    console.error(
      `No PostgreSQL answers at ${POSTGRES_URL.replace(/\/\/([^:@/]*):[^@]*@/, '//$1:***@')} (${error.message}): the PostgreSQL part is skipped (set AMBIENT_BENCH_POSTGRES_URL).`,
    );
    return backends.filter((b) => b !== 'postgres');
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Creates the account `bench` (system/*.cruds) in the database of `env` with the CLI; answers its password. */
export async function createAccount(root, env) {
  const password = `bench-${Math.random().toString(36).slice(2)}-pw`;
  const bin = join(root, 'bin', 'ambient-fhir.js');
  await run(process.execPath, [bin, 'account', 'create', 'bench', '--password-stdin', '--scopes', 'system/*.cruds'], {
    env,
    input: `${password}\n`,
  });
  return password;
}

/**
 * A client of the server at `url` with the bench account's token: `request(method, path, body)` under
 * /fhir answers the parsed body, and throws on a status other than 2xx.
 */
export async function connect(url, password) {
  const res = await fetch(`${url}/v1/ambient/api/auth/token`, {
    method: 'POST',
    body: new URLSearchParams({ username: 'bench', password }),
  });
  if (!res.ok) throw new Error(`token: HTTP ${res.status} ${await res.text()}`);
  const { access_token: token } = await res.json();
  const request = async (method, path, body) => {
    const res = await fetch(`${url}/fhir${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/fhir+json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${path}: HTTP ${res.status} ${text.slice(0, 500)}`);
    return text ? JSON.parse(text) : undefined;
  };
  return { request };
}

/** Exits with a word of advice when the server has not been built (the benchmarks run dist/). */
export function requireBuild(root) {
  if (existsSync(join(root, 'dist', 'main.js'))) return;
  console.error('Build first: npm install (or npm run build).');
  process.exit(1);
}

/** Prints the leading `//` comment of the script at `scriptUrl` (its usage) and exits. */
export function printUsage(scriptUrl) {
  const header = readFileSync(fileURLToPath(scriptUrl), 'utf8').split('\n');
  console.log(
    header
      .slice(
        0,
        header.findIndex((line) => !line.startsWith('//')),
      )
      .map((line) => line.replace(/^\/\/ ?/, ''))
      .join('\n'),
  );
  process.exit(0);
}

/** The commit measured, marked when src/ differs from it. */
export function commitOf(root) {
  try {
    const head = execFileSync('git', ['-C', root, 'rev-parse', '--short', 'HEAD']).toString().trim();
    const dirty = execFileSync('git', ['-C', root, 'status', '--porcelain', '--', 'src']).toString().trim();
    return dirty ? `${head} (src/ modified)` : head;
  } catch {
    return 'unknown';
  }
}
