// Every statement an export runs answers from an index, on both databases (as search/explain.int.test.ts
// checks searches): the page walk per level and filter, the version-at-transactionTime lookup, and the job
// and chunk statements. SQLite: no SCAN of a table; PostgreSQL: with sequential scans disabled, none in
// the plan.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from '../../test/support/databases.js';
import { createSearchTestEnv } from '../../test/support/search-env.js';
import type { SearchTestEnv } from '../../test/support/search-env.js';
import { FIXTURE } from '../../test/support/search-fixtures.js';
import { refreshSearchStatistics } from '../search/engine.js';
import { raw } from '../search/sql/fragment.js';
import type { Sql } from '../search/sql/fragment.js';
import { loadR4Definitions } from '../definitions/registry.js';
import { patientCompartmentParams } from './compartment.js';
import { ACCOUNT_BYTES, ACCOUNT_USAGE, CLAIM_CANDIDATES } from './jobs.js';
import { selectionFor } from './selection.js';
import type { ExportSpec } from './selection.js';
import { pageQuery, versionAtQuery } from './snapshot.js';

async function explain(env: SearchTestEnv, statement: Sql): Promise<string> {
  const { db } = env;
  const text = statement.text.startsWith(db.dialect.adhocStatement)
    ? statement.text.slice(db.dialect.adhocStatement.length)
    : statement.text;
  if (db.dialect.name === 'sqlite') {
    const rows = await db.query<{ detail: string }>(`EXPLAIN QUERY PLAN ${text}`, statement.params);
    return rows.map((r) => r.detail).join('\n');
  }
  return db.transaction(async (tx) => {
    await tx.execute('SET LOCAL enable_seqscan = off');
    const rows = await tx.query<{ 'QUERY PLAN': string }>(
      `${db.dialect.adhocStatement}EXPLAIN ${text}`,
      statement.params,
    );
    return rows.map((r) => r['QUERY PLAN']).join('\n');
  });
}

function assertIndexed(backend: string, plan: string, indexes: readonly string[]): void {
  if (backend === 'sqlite') {
    expect(
      plan.split('\n').filter((line) => /\bSCAN\b/.test(line) && !/SCAN (CONSTANT|SUBQUERY|json_each)/.test(line)),
      plan,
    ).toEqual([]);
    for (const index of indexes) expect(plan, plan).toContain(index);
  } else {
    expect(plan, plan).not.toMatch(/Seq Scan/);
  }
}

const window = { until: Date.now(), since: Date.parse('2020-01-01T00:00:00Z') };

/** [name, spec, type, indexes the SQLite plan must use]. */
const SHAPES: readonly [string, ExportSpec, string, readonly string[]][] = [
  [
    'system',
    { level: 'system', types: ['Patient'], typeFilters: [] },
    'Patient',
    ['resource_type_pk (type=? AND pk>?)'],
  ],
  [
    'Patient compartment',
    { level: 'patient', types: ['Observation'], typeFilters: [] },
    'Observation',
    ['resource_type_pk (type=? AND pk>?)', 'idx_reference_pk (pk=?)'],
  ],
  [
    'Group members',
    { level: 'group', groupPk: 1, types: ['Patient'], typeFilters: [] },
    'Patient',
    ['resource_type_pk (type=? AND pk>?)', 'idx_reference_pk (pk=?)'],
  ],
  [
    "Group members' compartments",
    { level: 'group', groupPk: 1, types: ['Observation'], typeFilters: [] },
    'Observation',
    ['resource_type_pk (type=? AND pk>?)', 'idx_reference_pk (pk=?)'],
  ],
  [
    "a small Group's members' compartments (read from the members)",
    { level: 'group', groupPk: 1, groupMembers: 2, types: ['Observation'], typeFilters: [] },
    'Observation',
    ['idx_reference_value (sp=? AND target_id=?'],
  ],
  [
    '_typeFilter',
    {
      level: 'system',
      types: ['Observation'],
      typeFilters: [
        { type: 'Observation', query: 'code=http://loinc.org|29463-7' },
        { type: 'Observation', query: 'subject.name=smith' },
      ],
    },
    'Observation',
    ['resource_type_pk (type=? AND pk>?)', 'idx_token_pk (pk=?', 'idx_reference_pk (pk=?'],
  ],
];

describe.each(BACKENDS)('export query plans on %s', (backend) => {
  let env: SearchTestEnv;

  beforeAll(async () => {
    env = await createSearchTestEnv(backend);
    for (const resource of FIXTURE) await env.store.update(structuredClone(resource));
    await refreshSearchStatistics(env.db, false);
  });
  afterAll(async () => env?.dispose());

  it.each(SHAPES)('walks a page of the %s export from indexes', async (_name, spec, type, indexes) => {
    const selection = selectionFor(
      env.db.dialect,
      env.engine.catalog,
      patientCompartmentParams(loadR4Definitions()),
      spec,
      type,
      0,
    );
    for (const since of [undefined, window.since]) {
      const page = pageQuery(env.db.dialect, type, selection, { until: window.until, since }, 42);
      assertIndexed(backend, await explain(env, page), indexes);
    }
  });

  it('looks up the version at transactionTime by (pk, version)', async () => {
    assertIndexed(backend, await explain(env, versionAtQuery(1, window.until)), [
      'sqlite_autoindex_resource_history_1 (pk=?)',
    ]);
  });

  it('reads and sweeps jobs and chunks from indexes', async () => {
    const statements: [string, (string | number)[], string[]][] = [
      [CLAIM_CANDIDATES, ['export', 1], ['export_job_kind_claim']],
      ['SELECT id FROM export_job WHERE expires_at < ? ORDER BY expires_at LIMIT ?', [1, 20], ['export_job_expires']],
      [ACCOUNT_USAGE, ['export', 'a'], ['export_job_account']],
      [ACCOUNT_BYTES, ['a'], ['export_job_account']],
      [
        'SELECT data FROM export_chunk WHERE job_id = ? AND type = ? AND file_no = ? AND seq = ?',
        ['j', 'Patient', 1, 0],
        ['sqlite_autoindex_export_chunk_1'],
      ],
      ['DELETE FROM export_chunk WHERE job_id = ?', ['j'], []],
    ];
    for (const [text, params, indexes] of statements) {
      assertIndexed(backend, await explain(env, Object.assign(raw(text), { params })), indexes);
    }
  });
});
