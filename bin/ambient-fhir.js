#!/usr/bin/env node
// The command line of ambient-fhir (docs/api.md): `node bin/ambient-fhir.js <command>`.
// It runs the compiled code in dist/, which `npm install` builds (the prepare script).
import { existsSync } from 'node:fs';

const entry = new URL('../dist/main.js', import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write('ambient-fhir is not built yet: run `npm install` (or `npm run build`) first.\n');
  process.exit(1);
}
await import(entry.href);
