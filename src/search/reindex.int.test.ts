// The reindex command rebuilds exactly the rows the write path writes, on both databases, and the CLI
// runs it on DATABASE_URL.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from '../../test/support/databases.js';
import { reindex } from './reindex.js';
import { TABLE_NAMES } from './tables.js';
import { createSearchTestEnv } from '../../test/support/search-env.js';
import type { SearchTestEnv } from '../../test/support/search-env.js';
import { FIXTURE } from '../../test/support/search-fixtures.js';

async function allRows(env: SearchTestEnv): Promise<string[]> {
  const out: string[] = [];
  for (const table of TABLE_NAMES) {
    const rows = await env.db.query(`SELECT * FROM ${table}`);
    for (const row of rows) out.push(`${table} ${JSON.stringify(Object.entries(row).sort())}`);
  }
  return out.sort();
}

describe.each(BACKENDS)('reindex on %s', (backend) => {
  let env: SearchTestEnv;
  beforeAll(async () => {
    env = await createSearchTestEnv(backend);
    for (const resource of FIXTURE) await env.store.update(structuredClone(resource));
    await env.store.delete('Patient', 'p6');
  });
  afterAll(async () => env?.dispose());

  it('rebuilds the same rows as the write path, in batches', async () => {
    const before = await allRows(env);
    expect(before.length).toBeGreaterThan(300);
    await env.db.execute('DELETE FROM idx_string');
    await env.db.execute("DELETE FROM idx_token WHERE code = 'male'");
    await env.db.execute('INSERT INTO idx_uri (pk, sp, grp, uri) VALUES (99999, 1, 0, ?)', ['stale']);
    const summary = await reindex(env.db, env.engine.catalog, { batchSize: 7 });
    expect(summary.resources).toBe(FIXTURE.length);
    expect((await allRows(env)).filter((r) => !r.includes('99999'))).toEqual(before);
    expect(env.matchIds(await env.search('Patient', 'name=smith'))).toEqual(['p1']);
  });

  it('limits itself to the types asked for', async () => {
    await env.db.execute('DELETE FROM idx_string');
    const summary = await reindex(env.db, env.engine.catalog, { types: ['Organization'] });
    expect(summary.resources).toBe(2);
    expect(env.matchIds(await env.search('Organization', 'name=acme'))).toEqual(['o1']);
    expect(env.matchIds(await env.search('Patient', 'name=smith'))).toEqual([]);
  });

  it('keys long values as the write path does, and they are found again', async () => {
    // The test before left the Patients' string rows out on purpose: put every row back first.
    await reindex(env.db, env.engine.catalog);
    const long = 'Zé中😀'.repeat(1_000);
    await env.store.update({
      resourceType: 'Observation',
      id: 'long-values',
      status: 'final',
      code: { coding: [{ system: `urn:test:${long}`, code: long }] },
      valueString: long,
    });
    const before = await allRows(env);
    // The value's rows (its parameter's, and its composites') hold a key and the whole value beside it.
    expect(
      before.filter((row) => row.startsWith('idx_string') && !row.includes('["norm_full",null]')).length,
    ).toBeGreaterThan(0);
    expect(
      before.filter((row) => row.startsWith('idx_token') && !row.includes('["code_full",null]')).length,
    ).toBeGreaterThan(0);
    await env.db.execute('DELETE FROM idx_string');
    await env.db.execute('DELETE FROM idx_token');
    await reindex(env.db, env.engine.catalog);
    expect(await allRows(env)).toEqual(before);
    const query = new URLSearchParams({ 'value-string:exact': long, code: `urn:test:${long}|${long}` });
    expect(env.matchIds(await env.search('Observation', query.toString()))).toEqual(['long-values']);
  });
});

describe('reindex command', () => {
  it('rebuilds the indexes of DATABASE_URL and prints a summary', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ambient-reindex-'));
    const root = fileURLToPath(new URL('../../', import.meta.url));
    const env = { ...process.env, DATABASE_URL: `sqlite:${join(dir, 'r.db')}`, LOG_LEVEL: 'silent' };
    const run = (...args: string[]) =>
      spawnSync(process.execPath, ['--import', 'tsx', 'src/main.ts', ...args], { cwd: root, env, encoding: 'utf8' });
    try {
      const result = run('reindex', '--batch-size', '100');
      expect(result.stderr).toBe('');
      expect(result.status).toBe(0);
      expect(result.stdout).toMatch(/^Reindexed 0 resources \(0 index rows\) in [0-9.]+ s/);
      expect(run('reindex', '--type', 'Nope').status).toBe(2);
      expect(run('reindex', '--bogus').status).toBe(2);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
