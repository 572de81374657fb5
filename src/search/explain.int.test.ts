// Every search shape answers from indexes (issue 4, "Speed"): EXPLAIN the statements of representative
// searches on both databases. SQLite: the plan must SEARCH (never SCAN) and use the named index.
// PostgreSQL: with sequential scans disabled, the plan must not contain one, i.e. an index serves every
// table the statement reads (the plans chosen with statistics are in docs/search.md).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from '../../test/support/databases.js';
import { loadR4Definitions } from '../definitions/registry.js';
import { compartmentCriterion, memberTypes } from './compartment.js';
import { everythingTypes, parseEverything, planEverything } from './everything.js';
import { refreshSearchStatistics } from './engine.js';
import { parseSearch } from './parse.js';
import { planSearch } from './plan.js';
import type { Plan } from './plan.js';
import { bindInclude, compileCount, compileInclude, compileSearch } from './sql/compile.js';
import type { Sql } from './sql/fragment.js';
import { createSearchTestEnv } from '../../test/support/search-env.js';
import type { SearchTestEnv } from '../../test/support/search-env.js';
import { FIXTURE } from '../../test/support/search-fixtures.js';

/** [type, query, indexes the SQLite plan must use]. */
const SHAPES: readonly [string, string, readonly string[]][] = [
  ['Patient', 'name=smi', ['idx_string_value (sp=? AND norm>? AND norm<?)']],
  ['Patient', 'name:exact=Smith', ['idx_string_value (sp=? AND norm=?)']],
  ['Patient', 'identifier=http://hospital.example/mrn|MRN1', ['idx_token_value (sp=? AND code=? AND system=?)']],
  ['Patient', 'identifier=MRN1', ['idx_token_value (sp=? AND code=?)']],
  ['Encounter', 'patient=Patient/p1', ['idx_reference_value (sp=? AND target_id=? AND target_type=?)']],
  ['Observation', 'subject=p1', ['idx_reference_value (sp=? AND target_id=?)']],
  ['Observation', 'date=2021-06-01', ['idx_date_value (sp=? AND lo>? AND lo<?)']],
  ['Patient', 'gender=female&birthdate=ge1980-01-01', ['idx_token_pk (pk=?)', 'idx_date_pk (pk=?)']],
  ['Patient', 'gender=female', ['idx_token_pk (pk=?)']],
  ['Patient', 'name:contains=mit', ['idx_string_pk (pk=?)']],
  ['Patient', 'name:missing=true', ['idx_string_pk (pk=?)']],
  ['Patient', 'name:not=smith', ['idx_string_pk (pk=?)']],
  [
    'Encounter',
    'patient.name=smith',
    ['idx_string_value (sp=? AND norm>? AND norm<?)', 'idx_reference_value (sp=? AND target_id=? AND target_type=?)'],
  ],
  [
    'Encounter',
    'patient.organization.name=acme',
    ['idx_string_value', 'idx_reference_value (sp=? AND target_id=? AND target_type=?)'],
  ],
  [
    'Patient',
    '_has:Observation:patient:code=29463-7',
    ['idx_token_value (sp=? AND code=?)', 'idx_reference_pk (pk=?)'],
  ],
  ['Patient', 'gender=male&_has:Observation:patient:code=29463-7', ['idx_token_pk (pk=?)', 'idx_reference_pk (pk=?)']],
  ['Patient', '_id=p1', ['sqlite_autoindex_resource_1 (type=? AND id=?)']],
  // OR lists, each bound as one parameter (Dialect.equalsAny): still one index search per value.
  ['Patient', '_id=p1,p2,p3', ['sqlite_autoindex_resource_1 (type=? AND id=?)']],
  ['Observation', 'code=29463-7,8302-2,1234-5', ['idx_token_value (sp=? AND code=?)']],
  [
    'Observation',
    'code=http://loinc.org|29463-7,http://loinc.org|8302-2,http://loinc.org|1234-5',
    ['idx_token_value (sp=? AND code=? AND system=?)'],
  ],
  ['Observation', 'subject=p1,p2,p3', ['idx_reference_value (sp=? AND target_id=?)']],
  [
    'Encounter',
    'patient=Patient/p1,Patient/p2,Patient/p3',
    ['idx_reference_value (sp=? AND target_id=? AND target_type=?)'],
  ],
  ['ValueSet', 'url=http://example.org/a,http://example.org/b', ['idx_uri_value (sp=? AND uri=?)']],
  ['Patient', 'name:exact=Smith,Jones', ['idx_string_value (sp=? AND norm=?)']],
  [
    'Observation',
    'code-value-quantity=http://loinc.org|8480-6$gt100',
    ['idx_token_value (sp=? AND code=? AND system=?)', 'idx_quantity_pk (pk=?)'],
  ],
  [
    'Observation',
    'value-quantity=70|http://unitsofmeasure.org|kg',
    ['idx_quantity_value (sp=? AND code=? AND system=? AND lo>? AND lo<?)'],
  ],
  ['ValueSet', 'url:below=http://example.org/fhir', ['idx_uri_value (sp=? AND uri>? AND uri<?)']],
  ['ValueSet', 'url=http://example.org/fhir/ValueSet/colors', ['idx_uri_value (sp=? AND uri=?)']],
  ['Patient', '_sort=birthdate', ['idx_date_value (sp=?)', 'idx_date_pk (pk=?)']],
  ['Patient', '_sort=-family&gender=female', ['idx_string_value (sp=?)', 'idx_token_pk (pk=?)']],
  ['Patient', '_sort=family&name=smi', ['idx_string_value (sp=? AND norm>? AND norm<?)', 'idx_string_pk (pk=?)']],
  ['Patient', '_sort=-_lastUpdated', ['resource_type_updated (type=?)']],
  ['Patient', '_lastUpdated=ge2020-01-01', ['resource_type']],
  ['RiskAssessment', 'probability=gt0.5', ['idx_number_pk (pk=?)']],
  ['Encounter', '_length=ge3', ['idx_number_pk (pk=?)']],
  // Location near: the latitude band is the index range, the rest is tested on its entries.
  ['Location', 'near=43.77925|11.24626|900|km', ['idx_number_value (sp=? AND lo>? AND lo<?)']],
];

async function explain(env: SearchTestEnv, statement: Sql): Promise<string> {
  const { db } = env;
  if (db.dialect.name === 'sqlite') {
    const rows = await db.query<{ detail: string }>(`EXPLAIN QUERY PLAN ${statement.text}`, statement.params);
    return rows.map((r) => r.detail).join('\n');
  }
  return db.transaction(async (tx) => {
    await tx.execute('SET LOCAL enable_seqscan = off');
    const text = statement.text.replace(db.dialect.adhocStatement, `${db.dialect.adhocStatement}EXPLAIN `);
    const rows = await tx.query<{ 'QUERY PLAN': string }>(text, statement.params);
    return rows.map((r) => r['QUERY PLAN']).join('\n');
  });
}

function planFor(env: SearchTestEnv, type: string, query: string) {
  return planSearch(parseSearch([...new URLSearchParams(query)]), [type], {
    catalog: env.engine.catalog,
    references: env.engine.catalog.references,
    now: Date.now(),
    strict: true,
    canSearch: () => true,
    dialect: env.db.dialect,
  });
}

function assertIndexed(backend: string, plan: string, indexes: readonly string[]): void {
  if (backend === 'sqlite') {
    expect(
      plan.split('\n').filter((line) => /\bSCAN\b/.test(line) && !/SCAN (CONSTANT|SUBQUERY|q\b|json_each)/.test(line)),
      plan,
    ).toEqual([]);
    for (const index of indexes) expect(plan, plan).toContain(index);
  } else {
    expect(plan, plan).not.toMatch(/Seq Scan/);
  }
}

describe.each(BACKENDS)('query plans on %s', (backend) => {
  let env: SearchTestEnv;

  beforeAll(async () => {
    env = await createSearchTestEnv(backend);
    for (const resource of FIXTURE) await env.store.update(structuredClone(resource));
    await refreshSearchStatistics(env.db, false);
  });

  afterAll(async () => {
    await env?.dispose();
  });

  it.each(SHAPES)('%s?%s uses an index', async (type, query, indexes) => {
    const plan = planFor(env, type, query);
    const page = compileSearch(plan, env.db.dialect, { limit: 21, inlineBytes: 65536 });
    for (const statement of [page, ...page.continuation])
      assertIndexed(backend, await explain(env, statement), indexes.slice(0, statement === page ? undefined : 0));
    // The next page and the count read the same indexes.
    const next = compileSearch(plan, env.db.dialect, {
      limit: 21,
      position: [...plan.sort.map(() => 1), 5],
      inlineBytes: 65536,
    });
    assertIndexed(backend, await explain(env, next), []);
    if (!query.includes('_sort')) assertIndexed(backend, await explain(env, compileCount(plan, env.db.dialect)), []);
  });

  /** `GET /fhir/{compartment}/p1/{types}?query`'s plan (engine.ts compartmentSearch). */
  function compartmentPlan(compartment: string, types: readonly string[], query: string, estimatedRows?: number): Plan {
    const rule = loadR4Definitions().compartment(compartment)!;
    const plan = planSearch(parseSearch([...new URLSearchParams(query)]), types, {
      catalog: env.engine.catalog,
      references: env.engine.catalog.references,
      now: Date.now(),
      strict: true,
      canSearch: () => true,
      dialect: env.db.dialect,
    });
    const inCompartment = { ...compartmentCriterion(rule, 'p1', types), estimatedRows };
    return { ...plan, criteria: [inCompartment, ...plan.criteria] };
  }

  const patientMembers = () => memberTypes(loadR4Definitions().compartment('Patient')!);
  const COMPARTMENT_SHAPES: readonly [string, () => Plan, readonly string[]][] = [
    [
      'Patient/p1/Observation',
      () => compartmentPlan('Patient', ['Observation'], ''),
      ['idx_reference_value (sp=? AND target_id=? AND target_type=?)'],
    ],
    [
      'Patient/p1/Patient (the patient itself and its links)',
      () => compartmentPlan('Patient', ['Patient'], ''),
      ['idx_reference_value (sp=? AND target_id=? AND target_type=?)', 'sqlite_autoindex_resource_1 (type=? AND id=?)'],
    ],
    [
      'Patient/p1/* (every member type)',
      () => compartmentPlan('Patient', patientMembers(), ''),
      ['idx_reference_value (sp=? AND target_id=? AND target_type=?)', 'sqlite_autoindex_resource_1 (type=? AND id=?)'],
    ],
    [
      'Patient/p1/Observation?code=29463-7&_sort=-date',
      () => compartmentPlan('Patient', ['Observation'], 'code=29463-7&_sort=-date'),
      ['idx_reference_value (sp=? AND target_id=? AND target_type=?)', 'idx_token_pk (pk=?)'],
    ],
    [
      'Patient/p1/Observation with more referrers than a driver may read (probed)',
      () => compartmentPlan('Patient', ['Observation'], '', 1_000_000),
      ['idx_reference_pk (pk=?)'],
    ],
    [
      'Encounter/p1/Observation?date=ge2020',
      () => compartmentPlan('Encounter', ['Observation'], 'date=ge2020'),
      ['idx_reference_value (sp=? AND target_id=? AND target_type=?)', 'idx_date_pk (pk=?)'],
    ],
    [
      'Patient/p1/$everything?start=2020-01-01&end=2022&_since=2020-01-01',
      () => {
        const registry = loadR4Definitions();
        const rule = registry.compartment('Patient')!;
        const request = parseEverything([
          ['start', '2020-01-01'],
          ['end', '2022'],
          ['_since', '2020-01-01'],
        ]);
        const types = everythingTypes(registry, rule, undefined, () => true);
        return planEverything(rule, 'p1', types, request, {
          catalog: env.engine.catalog,
          plan: { references: env.engine.catalog.references, now: Date.now(), dialect: env.db.dialect },
          canRead: () => true,
        });
      },
      ['idx_reference_value (sp=? AND target_id=? AND target_type=?)', 'idx_date_pk (pk=?)'],
    ],
  ];

  it.each(COMPARTMENT_SHAPES)('%s uses an index', async (_name, plan, indexes) => {
    const planned = plan();
    const page = compileSearch(planned, env.db.dialect, { limit: 21, inlineBytes: 65536 });
    for (const statement of [page, ...page.continuation])
      assertIndexed(backend, await explain(env, statement), indexes.slice(0, statement === page ? undefined : 0));
    const next = compileSearch(planned, env.db.dialect, {
      limit: 21,
      position: [...planned.sort.map(() => 1), 5],
      inlineBytes: 65536,
    });
    assertIndexed(backend, await explain(env, next), []);
    assertIndexed(backend, await explain(env, compileCount(planned, env.db.dialect)), []);
    for (const include of planned.includes) {
      const statement = bindInclude(compileInclude(env.db.dialect, include, 65536), [1, 2, 3], 1001);
      assertIndexed(backend, await explain(env, statement), ['idx_reference_pk (pk=?)']);
    }
  });

  it('reads includes from the reference index', async () => {
    const includes = planFor(env, 'Patient', '_include=Patient:organization&_revinclude=Encounter:patient').includes;
    const forward = await explain(
      env,
      bindInclude(compileInclude(env.db.dialect, includes[0], 65536), [1, 2, 3], 1001),
    );
    assertIndexed(backend, forward, ['idx_reference_pk (pk=?)', 'sqlite_autoindex_resource_1 (type=? AND id=?)']);
    const reverse = await explain(
      env,
      bindInclude(
        compileInclude(env.db.dialect, includes[1], 65536),
        [
          ['Patient', 'p1'],
          ['Patient', 'p2'],
        ],
        1001,
      ),
    );
    assertIndexed(backend, reverse, ['idx_reference_value (sp=? AND target_id=?']);
  });
});
