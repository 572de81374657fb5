// Which modules may not import which (docs/architecture.md, "Folders"): the layers import downwards only.
// search/ implements the SearchEngine interface that fhir/services.ts declares and uses fhir/ helpers;
// fhir/ must not import search/ back, not even types: services.ts at the top of src/ composes the two.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const SRC = fileURLToPath(new URL('.', import.meta.url));

/** The HTTP layer and the command line sit on top: nothing below imports them. */
const BELOW_HTTP = [
  'auth',
  'definitions',
  'export',
  'fhir',
  'import',
  'profiles',
  'request-fhirpath',
  'scribe',
  'search',
  'storage',
  'subscriptions',
  'terminology',
  'validation',
  'workers',
];

/** [importing module, imported module]: no file under the first imports a file under the second. */
const FORBIDDEN: readonly (readonly [string, string])[] = [
  ...BELOW_HTTP.flatMap((module) => [[module, 'http'] as const, [module, 'cli'] as const]),
  // The FHIR layer: below search, export, import and the scribe, which all write and read through it.
  ...['search', 'export', 'import', 'scribe', 'subscriptions', 'profiles'].map((module) => ['fhir', module] as const),
  // Storage knows SQL, not who asks or what for.
  ...['auth', 'export', 'import', 'scribe', 'subscriptions', 'validation', 'request-fhirpath', 'profiles'].map(
    (module) => ['storage', module] as const,
  ),
  // The R4 definitions and validation are pure: no database, no requests.
  ...['auth', 'fhir', 'search', 'storage', 'validation'].map((module) => ['definitions', module] as const),
  ...['auth', 'search', 'storage', 'export', 'import', 'scribe', 'profiles'].map(
    (module) => ['validation', module] as const,
  ),
  ...['auth', 'export', 'import', 'scribe'].map((module) => ['search', module] as const),
  // The terminology engine computes from definitions and what it is handed (the stored ValueSets and
  // CodeSystems come through an interface the FHIR layer implements): no database, no requests.
  ...['auth', 'fhir', 'search', 'storage', 'validation', 'export', 'import', 'scribe', 'subscriptions'].map(
    (module) => ['terminology', module] as const,
  ),
  // Validation stays pure and synchronous: its required bindings read r4.json's code lists, which are the
  // terminology engine's expansions, written at build time by src/terminology/build-r4-bindings.ts.
  ...['definitions', 'storage', 'validation', 'search'].map((module) => [module, 'terminology'] as const),
];

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    // End-to-end suites drive the whole product (the import command, the CLI) wherever they live.
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.int.test.ts') ? [path] : [];
  });
}

/** The relative specifiers a file imports or re-exports, static or dynamic, type-only included. */
function relativeImports(text: string): string[] {
  const specifiers = text.matchAll(/(?:\bfrom\s*|\bimport\s*\(?\s*)['"](\.{1,2}\/[^'"]+)['"]/g);
  return [...specifiers].map((match) => match[1]);
}

const inside = (path: string, module: string): boolean => path.startsWith(join(SRC, module) + sep);

describe('module boundaries', () => {
  it('finds the imports of a file, type-only and dynamic ones included', () => {
    const text = `import type { A } from '../search/a.js';\nexport { B } from "./b.js";\nawait import('../c.js');\nimport './d.js';`;
    expect(relativeImports(text)).toEqual(['../search/a.js', './b.js', '../c.js', './d.js']);
  });

  it.each(FORBIDDEN)('no file under src/%s/ imports from src/%s/', (from, to) => {
    const offenders = sources(join(SRC, from)).flatMap((path) =>
      relativeImports(readFileSync(path, 'utf8'))
        .filter((specifier) => inside(resolve(dirname(path), specifier), to))
        .map((specifier) => `${relative(SRC, path)} imports ${specifier}`),
    );
    expect(offenders).toEqual([]);
  });
});
