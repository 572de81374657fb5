// the style notes §7: every difference between SQLite and PostgreSQL lives in the Dialect object
// (dialect.ts). Code elsewhere asks the dialect for SQL or a capability; it never asks which
// database it is on. Tests may (they check backend-specific plans).
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const SRC = fileURLToPath(new URL('../..', import.meta.url));

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts') ? [path] : [];
  });
}

describe('the dialect boundary', () => {
  it('no source file outside the dialect branches on the database name', () => {
    const offenders = sources(SRC)
      .filter((path) => !path.endsWith(join('storage', 'sql', 'dialect.ts')))
      .filter((path) => /dialect\.name\b|\.name\s*[!=]==?\s*'(postgres|sqlite)'/.test(readFileSync(path, 'utf8')))
      .map((path) => relative(SRC, path));
    expect(offenders).toEqual([]);
  });
});
