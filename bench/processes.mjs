// What the benchmark and the soak share: running the CLI, the server's command line and finding a free port.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
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
