// What the benchmarks and the soak share: running the CLI, the server's command line, finding a free port,
// starting a server, and PostgreSQL's pid.
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';

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

/** Runs a command to completion; resolves with its output, rejects (with the output) on a non-zero exit. */
export function run(command, args, { env = {}, input } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
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
 * resolves once it is ready. `stop` sends SIGTERM and resolves when it has exited.
 */
export async function startServer(root, env) {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const server = spawn(process.execPath, serveArgs(root), {
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
