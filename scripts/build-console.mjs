// Builds the web console (docs/console.md): the resource types and their summary elements from
// generated/r4.json into generated/console-types.json, then Vite: console/ → dist/console/. Prints
// each file's size, raw and gzipped, and fails when the whole exceeds the bound.
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { build } from 'vite';

const root = fileURLToPath(new URL('..', import.meta.url));
const out = join(root, 'dist', 'console');

/** The console's JavaScript, CSS and HTML, gzipped, at most: well under what a slow hospital link loads quickly. */
export const MAX_GZIP_BYTES = 300 * 1024;

const INTERNAL = new Set(['id', 'meta', 'implicitRules']);

function writeTypes() {
  const r4 = JSON.parse(readFileSync(join(root, 'generated', 'r4.json'), 'utf8'));
  const summaryElements = Object.fromEntries(
    Object.entries(r4.summaryElements).map(([type, names]) => [type, names.filter((n) => !INTERNAL.has(n))]),
  );
  writeFileSync(join(root, 'generated', 'console-types.json'), JSON.stringify({ summaryElements }) + '\n');
}

function files(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : [path];
  });
}

writeTypes();
await build({ configFile: join(root, 'console', 'vite.config.ts'), logLevel: 'warn' });

let total = 0;
for (const path of files(out).sort()) {
  const bytes = readFileSync(path);
  const gz = gzipSync(bytes, { level: 9 }).length;
  total += gz;
  console.log(
    `  ${relative(root, path).padEnd(44)} ${String(bytes.length).padStart(8)} B  ${String(gz).padStart(7)} B gzip`,
  );
}
console.log(`wrote ${relative(root, out)}: ${(total / 1024).toFixed(1)} KB gzipped`);
if (total > MAX_GZIP_BYTES) {
  console.error(`the console is ${total} B gzipped, over the bound of ${MAX_GZIP_BYTES} B`);
  process.exit(1);
}
