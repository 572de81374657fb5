#!/usr/bin/env node
// The command line of ambient-fhir (docs/api.md): `node bin/ambient-fhir.js <command>`.
// It runs the compiled code in dist/: in a checkout `npm install` builds it (the prepare script); the
// package that `npm pack` makes carries it, so `npm install -g` of that package compiles no TypeScript.
import { existsSync } from 'node:fs';

const entry = new URL('../dist/main.js', import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write('ambient-fhir is not built yet: run `npm install` (or `npm run build`) first.\n');
  process.exit(1);
}
await import(entry.href);
