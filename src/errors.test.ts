// The catalogue and its documentation are one list (as Fastify checks its errors against its reference):
// every code of ERROR_CATALOG has its row in docs/api.md's "Error codes" table with its status, and
// every row there names a code of the catalogue.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ERROR_CATALOG } from './errors.js';

/** The rows of the table under `### Error codes`, as [code, HTTP status], in the order written. */
function documentedRows(): [string, number][] {
  const doc = readFileSync(new URL('../docs/api.md', import.meta.url), 'utf8');
  const section = doc.split(/^### Error codes$/m)[1]?.split(/^#/m)[0] ?? '';
  return section.split('\n').flatMap((line): [string, number][] => {
    const cells = /^\|\s*`([^`]+)`\s*\|\s*(\d{3})\s*\|/.exec(line);
    return cells ? [[cells[1], Number(cells[2])]] : [];
  });
}

describe('the error catalogue in docs/api.md', () => {
  const rows = documentedRows();
  const documented = new Map(rows);
  const catalogue = new Map(Object.entries(ERROR_CATALOG).map(([code, entry]) => [code, entry.status]));

  it('is one table with a row per code', () => {
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.filter(([code], i) => rows.findIndex(([other]) => other === code) !== i)).toEqual([]);
  });

  it('documents every code of the catalogue, with its status', () => {
    expect([...catalogue.keys()].filter((code) => !documented.has(code))).toEqual([]);
    const wrongStatus = [...catalogue]
      .filter(([code, status]) => documented.has(code) && documented.get(code) !== status)
      .map(([code, status]) => `${code}: ${status} in src/errors.ts, ${documented.get(code)} in docs/api.md`);
    expect(wrongStatus).toEqual([]);
  });

  it('documents no code the catalogue does not have', () => {
    expect([...documented.keys()].filter((code) => !catalogue.has(code))).toEqual([]);
  });
});
