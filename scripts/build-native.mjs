// Builds native/sqlite-interrupt.c into generated/: part of `npm run build`, and the package's install
// script, so that `npm install` in a checkout and `npm install -g` of the package (docs/deploy.md) build it.
// The extension lets the SQLite search pool stop a statement at its time budget (see
// src/storage/sqlite/read-pool.ts), and the writer's watchdog stop a statement of the writer
// (src/storage/sqlite/statement-watchdog.ts). It compiles against the SQLite headers better-sqlite3 ships, with
// the C compiler better-sqlite3's own build needs. Without a compiler the server still works: searches
// past their budget are then stopped by ending their thread, the writer's statements are not bounded
// (docs/storage.md), and this script says so.
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const headers = join(dirname(createRequire(import.meta.url).resolve('better-sqlite3/package.json')), 'deps', 'sqlite3');
const suffix = process.platform === 'darwin' ? 'dylib' : process.platform === 'win32' ? 'dll' : 'so';
const output = join(root, 'generated', `sqlite-interrupt.${suffix}`);
const compiler = process.env.CC || 'cc';
const flags = process.platform === 'darwin' ? ['-dynamiclib'] : ['-shared', '-fPIC'];

mkdirSync(dirname(output), { recursive: true });
try {
  execFileSync(compiler, ['-O2', ...flags, '-I', headers, '-o', output, join(root, 'native', 'sqlite-interrupt.c')], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  console.log(`wrote ${output}`);
} catch (error) {
  console.warn(
    `warning: could not build ${output} (${error.message}); searches past their time budget will be stopped by ending their thread, and the SQLite writer's statements will not be bounded (docs/storage.md)`,
  );
}
