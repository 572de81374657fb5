// Builds the web console (docs/console.md): the resource types, their summary elements, the types
// their reference search parameters can target and the value sets of their top-level required
// bindings, from generated/r4.json into generated/console-types.json, then Vite: console/ → dist/console/. Prints each file's size, raw and
// gzipped, and fails when the whole exceeds the bound.
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

/**
 * For each resource type with reference search parameters, the types they can target together, as the
 * server's catalog reads them (a parameter without target types targets any type): a list, or
 * `{ "allBut": [...] }` when it covers most types (most types have a parameter on `Reference(Any)`, which
 * targets all but Parameters), to keep the bundle small. The console's "Referred to by" asks, for a
 * resource of type T, `_revinclude=Source:*` for each source type whose targets include T.
 */
function referenceTargets(r4, types) {
  const out = {};
  for (const [source, params] of Object.entries(r4.searchParameters)) {
    const references = params.filter((p) => p.type === 'reference' && p.expression);
    if (references.length === 0 || !types.includes(source)) continue;
    const targets = references.some((p) => !p.targets?.length)
      ? new Set(types)
      : new Set(references.flatMap((p) => p.targets));
    const listed = types.filter((t) => targets.has(t));
    out[source] = listed.length > types.length / 2 ? { allBut: types.filter((t) => !targets.has(t)) } : listed;
  }
  return out;
}

/** The element types a code picker can fill (what its Insert writes depends on which). */
const CODED = new Set(['code', 'Coding', 'CodeableConcept']);

/**
 * For each resource type, its top-level coded elements with a required binding (generated/r4.json
 * records only those), as `{ element: [value set url, element type] }`: the code picker's offers.
 * Top-level only, to keep the bundle small; nested elements' value sets can be typed in.
 */
function requiredBindings(r4, types) {
  const out = {};
  for (const type of types) {
    const bound = Object.entries(r4.types[type]?.elements ?? {}).filter(
      ([name, element]) =>
        !name.includes('.') && element.binding && element.types?.length === 1 && CODED.has(element.types[0].code),
    );
    if (bound.length > 0) {
      out[type] = Object.fromEntries(bound.map(([name, element]) => [name, [element.binding, element.types[0].code]]));
    }
  }
  return out;
}

function writeTypes() {
  const r4 = JSON.parse(readFileSync(join(root, 'generated', 'r4.json'), 'utf8'));
  const summaryElements = Object.fromEntries(
    Object.entries(r4.summaryElements).map(([type, names]) => [type, names.filter((n) => !INTERNAL.has(n))]),
  );
  const types = Object.keys(summaryElements).sort();
  writeFileSync(
    join(root, 'generated', 'console-types.json'),
    JSON.stringify({
      summaryElements,
      referenceTargets: referenceTargets(r4, types),
      requiredBindings: requiredBindings(r4, types),
    }) + '\n',
  );
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
