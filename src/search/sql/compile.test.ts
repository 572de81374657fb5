// Pinned SQL (HAPI's lesson): the statements representative searches compile to, on both dialects.
// A change here is a change of query plan: check EXPLAIN (explain.int.test.ts, docs/search.md) first.
import { describe, expect, it } from 'vitest';
import { loadR4Definitions } from '../../definitions/registry.js';
import { postgresDialect, sqliteDialect } from '../../storage/sql/dialect.js';
import type { Dialect } from '../../storage/sql/dialect.js';
import { compartmentCriterion } from '../compartment.js';
import { createSearchCatalog } from '../engine.js';
import { parseSearch } from '../parse.js';
import { planSearch } from '../plan.js';
import type { Plan, PlannedCriterion } from '../plan.js';
import {
  CHAIN_DRIVE_LIMIT,
  compileCount,
  bindInclude,
  compileInclude,
  compileSearch,
  compileSearchStatements,
  ESTIMATE_CAP,
  JOIN_DRIVE_LIMIT,
} from './compile.js';
import type { PageBounds } from './compile.js';

const registry = loadR4Definitions();
const catalog = createSearchCatalog(registry, 'http://fhir.test/fhir');

function plan(type: string, query: string, dialect: Dialect = sqliteDialect) {
  return planSearch(parseSearch([...new URLSearchParams(query)]), [type], {
    catalog,
    references: catalog.references,
    now: Date.UTC(2025, 0, 1),
    strict: true,
    canSearch: () => true,
    dialect,
  });
}

/** The page statement(s) with `?` placeholders, sp ids shown by name so the pins read well. */
function compiled(
  dialect: Dialect,
  type: string,
  query: string,
  page: PageBounds = { limit: 21, inlineBytes: 65536 },
): string {
  const statement = compileSearch(plan(type, query, dialect), dialect, page);
  return [statement, ...statement.continuation]
    .map((s) => `${s.text}\n  -- ${JSON.stringify(named(type, s.params))}`)
    .join('\n');
}

function named(type: string, params: readonly unknown[]): unknown[] {
  const names = new Map<unknown, string>();
  for (const t of registry.resourceTypes.filter(
    (t) => t === type || ['Patient', 'Encounter', 'Observation'].includes(t),
  )) {
    for (const p of catalog.forType(t).params.values()) {
      names.set(p.sp, `sp(${t}.${p.code})`);
      names.set(p.extraSp, `sp(${t}.${p.code}:extra)`);
    }
  }
  return params.map((p) => names.get(p) ?? p);
}

describe('pinned SQL (SQLite)', () => {
  const d = sqliteDialect;
  it('drives a selective string prefix from the index and pages by pk', () => {
    expect(compiled(d, 'Patient', 'name=smi')).toMatchInlineSnapshot(`
      "SELECT r0.pk, r0.id, r0.type, CASE WHEN octet_length(r0.content) <= ? THEN r0.content END AS content, octet_length(r0.content) AS content_bytes, r0.version AS content_version FROM resource r0 WHERE (r0.deleted = 0 AND r0.pk IN (SELECT t.pk FROM idx_string t WHERE t.sp = ? AND (t.norm >= ? AND t.norm < ?))) AND 1=1 ORDER BY r0.pk ASC LIMIT ?
        -- [65536,"sp(Patient.name)","smi","smj",21]"
    `);
  });
  it('probes broad criteria per resource in pk order', () => {
    expect(compiled(d, 'Patient', 'gender=female&birthdate=ge1980-01-01')).toMatchInlineSnapshot(`
      "SELECT r0.pk, r0.id, r0.type, CASE WHEN octet_length(r0.content) <= ? THEN r0.content END AS content, octet_length(r0.content) AS content_bytes, r0.version AS content_version FROM resource r0 WHERE (r0.type = ? AND r0.deleted = 0 AND EXISTS (SELECT 1 FROM idx_token t WHERE t.pk = r0.pk AND +t.sp = ? AND t.code = ?) AND EXISTS (SELECT 1 FROM idx_date t WHERE t.pk = r0.pk AND +t.sp = ? AND (t.hi > ? OR (t.lo >= ? AND t.lo < ? AND t.hi <= ?)))) AND 1=1 ORDER BY r0.pk ASC LIMIT ?
        -- [65536,"Patient","sp(Patient.gender)","female","sp(Patient.birthdate)",315619200000,315532800000,315619200000,315619200000,21]"
    `);
  });
  it('looks up a token with system and code', () => {
    expect(compiled(d, 'Patient', 'identifier=http://hospital.example/mrn|MRN1')).toMatchInlineSnapshot(`
      "SELECT r0.pk, r0.id, r0.type, CASE WHEN octet_length(r0.content) <= ? THEN r0.content END AS content, octet_length(r0.content) AS content_bytes, r0.version AS content_version FROM resource r0 WHERE (r0.deleted = 0 AND r0.pk IN (SELECT t.pk FROM idx_token t WHERE t.sp = ? AND (t.code = ? AND t.system = ?))) AND 1=1 ORDER BY r0.pk ASC LIMIT ?
        -- [65536,"sp(Patient.identifier)","MRN1","http://hospital.example/mrn",21]"
    `);
  });
  it('answers a reference from (sp, target_id, target_type)', () => {
    expect(compiled(d, 'Encounter', 'patient=Patient/123')).toMatchInlineSnapshot(`
      "SELECT r0.pk, r0.id, r0.type, CASE WHEN octet_length(r0.content) <= ? THEN r0.content END AS content, octet_length(r0.content) AS content_bytes, r0.version AS content_version FROM resource r0 WHERE (r0.deleted = 0 AND r0.pk IN (SELECT t.pk FROM idx_reference t WHERE t.sp = ? AND (t.target_id = ? AND t.target_type = ?))) AND 1=1 ORDER BY r0.pk ASC LIMIT ?
        -- [65536,"sp(Encounter.patient)","123","Patient",21]"
    `);
  });
  it('answers _id from the resource table', () => {
    expect(compiled(d, 'Patient', '_id=123')).toMatchInlineSnapshot(`
      "SELECT r0.pk, r0.id, r0.type, CASE WHEN octet_length(r0.content) <= ? THEN r0.content END AS content, octet_length(r0.content) AS content_bytes, r0.version AS content_version FROM resource r0 WHERE (r0.type = ? AND r0.deleted = 0 AND r0.id = ?) AND 1=1 ORDER BY r0.pk ASC LIMIT ?
        -- [65536,"Patient","123",21]"
    `);
  });
  it('chains through the referenced resources', () => {
    expect(compiled(d, 'Encounter', 'patient.name=smith')).toMatchInlineSnapshot(`
      "SELECT r0.pk, r0.id, r0.type, CASE WHEN octet_length(r0.content) <= ? THEN r0.content END AS content, octet_length(r0.content) AS content_bytes, r0.version AS content_version FROM resource r0 WHERE (r0.deleted = 0 AND r0.pk IN (SELECT f0.pk FROM idx_reference f0 WHERE f0.sp = ? AND f0.target_type = ? AND f0.target_id IN (SELECT r1.id FROM resource r1 WHERE (r1.deleted = 0 AND r1.pk IN (SELECT t.pk FROM idx_string t WHERE t.sp = ? AND (t.norm >= ? AND t.norm < ?)))))) AND 1=1 ORDER BY r0.pk ASC LIMIT ?
        -- [65536,"sp(Encounter.patient)","Patient","sp(Patient.name)","smith","smiti",21]"
    `);
  });
  it('reverse-chains with _has', () => {
    expect(compiled(d, 'Patient', '_has:Observation:patient:code=1234-5')).toMatchInlineSnapshot(`
      "SELECT r0.pk, r0.id, r0.type, CASE WHEN octet_length(r0.content) <= ? THEN r0.content END AS content, octet_length(r0.content) AS content_bytes, r0.version AS content_version FROM resource r0 WHERE (r0.deleted = 0 AND r0.pk IN (SELECT r2.pk FROM resource r2 WHERE r2.type = ? AND r2.id IN (SELECT f0.target_id FROM idx_reference f0 WHERE +f0.sp = ? AND f0.target_type = ? AND f0.pk IN (SELECT r1.pk FROM resource r1 WHERE (r1.deleted = 0 AND r1.pk IN (SELECT t.pk FROM idx_token t WHERE t.sp = ? AND t.code = ?)))))) AND 1=1 ORDER BY r0.pk ASC LIMIT ?
        -- [65536,"Patient","sp(Observation.patient)","Patient","sp(Observation.code)","1234-5",21]"
    `);
  });
  it('matches composite components on one element', () => {
    expect(compiled(d, 'Observation', 'code-value-quantity=http://loinc.org|8480-6$gt100')).toMatchInlineSnapshot(`
      "SELECT r0.pk, r0.id, r0.type, CASE WHEN octet_length(r0.content) <= ? THEN r0.content END AS content, octet_length(r0.content) AS content_bytes, r0.version AS content_version FROM resource r0 WHERE (r0.deleted = 0 AND r0.pk IN (SELECT c0.pk FROM idx_token c0 JOIN idx_quantity c1 ON c1.pk = c0.pk AND c1.grp = c0.grp AND +c1.sp = ? AND (c1.system <> ? AND c1.hi > ?) WHERE (1=1 AND c0.sp = ? AND (c0.code = ? AND c0.system = ?)))) AND 1=1 ORDER BY r0.pk ASC LIMIT ?
        -- [65536,110754548802817,"urn:ambient-fhir:ucum-canonical",100,265030781601900,"8480-6","http://loinc.org",21]"
    `);
  });
  it('continues a page after a keyset position', () => {
    expect(compiled(d, 'Patient', 'gender=female', { limit: 21, position: [42], inlineBytes: 65536 }))
      .toMatchInlineSnapshot(`
      "SELECT r0.pk, r0.id, r0.type, CASE WHEN octet_length(r0.content) <= ? THEN r0.content END AS content, octet_length(r0.content) AS content_bytes, r0.version AS content_version FROM resource r0 WHERE (r0.type = ? AND r0.deleted = 0 AND EXISTS (SELECT 1 FROM idx_token t WHERE t.pk = r0.pk AND +t.sp = ? AND t.code = ?)) AND r0.pk > ? ORDER BY r0.pk ASC LIMIT ?
        -- [65536,"Patient","sp(Patient.gender)","female",42,21]"
    `);
  });
  it('sorts from the index when no criterion is selective (then the resources without a value)', () => {
    expect(compiled(d, 'Patient', '_sort=-birthdate&gender=female')).toMatchInlineSnapshot(`
      "SELECT r.pk, r.id, r.type, CASE WHEN octet_length(r.content) <= ? THEN r.content END AS content, octet_length(r.content) AS content_bytes, r.version AS content_version, q.s0 FROM (SELECT t.pk AS pk, t.lo AS s0 FROM idx_date t JOIN resource r0 ON r0.pk = t.pk WHERE t.sp = ? AND 1=1 AND NOT EXISTS (SELECT 1 FROM idx_date u WHERE u.pk = t.pk AND +u.sp = ? AND (u.lo > t.lo OR (u.lo = t.lo AND u.hi > t.hi))) AND (r0.type = ? AND r0.deleted = 0 AND EXISTS (SELECT 1 FROM idx_token t WHERE t.pk = r0.pk AND +t.sp = ? AND t.code = ?)) ORDER BY t.lo DESC, t.pk ASC LIMIT ?) q JOIN resource r ON r.pk = q.pk ORDER BY q.s0 DESC, q.pk ASC
        -- [65536,"sp(Patient.birthdate)","sp(Patient.birthdate)","Patient","sp(Patient.gender)","female",21]
      SELECT r0.pk, r0.id, r0.type, CASE WHEN octet_length(r0.content) <= ? THEN r0.content END AS content, octet_length(r0.content) AS content_bytes, r0.version AS content_version, NULL AS s0 FROM resource r0 WHERE (r0.type = ? AND r0.deleted = 0 AND EXISTS (SELECT 1 FROM idx_token t WHERE t.pk = r0.pk AND +t.sp = ? AND t.code = ?)) AND NOT EXISTS (SELECT 1 FROM idx_date u WHERE u.pk = r0.pk AND +u.sp = ?) AND 1=1 ORDER BY r0.pk ASC LIMIT ?
        -- [65536,"Patient","sp(Patient.gender)","female","sp(Patient.birthdate)",21]"
    `);
  });
  it('sorts the matches when a criterion is selective', () => {
    expect(compiled(d, 'Patient', '_sort=family,-birthdate&name=smi')).toMatchInlineSnapshot(`
      "SELECT r.pk, r.id, r.type, CASE WHEN octet_length(r.content) <= ? THEN r.content END AS content, octet_length(r.content) AS content_bytes, r.version AS content_version, q.s0, q.s1 FROM (SELECT r0.pk AS pk, (SELECT MIN(t.norm) FROM idx_string t WHERE t.pk = r0.pk AND +t.sp = ?) AS s0, (SELECT MAX(t.lo) FROM idx_date t WHERE t.pk = r0.pk AND +t.sp = ?) AS s1 FROM resource r0 WHERE (r0.deleted = 0 AND r0.pk IN (SELECT t.pk FROM idx_string t WHERE t.sp = ? AND (t.norm >= ? AND t.norm < ?)))) q JOIN resource r ON r.pk = q.pk WHERE 1=1 ORDER BY (q.s0 IS NULL) ASC, q.s0 ASC, (q.s1 IS NULL) ASC, q.s1 DESC, q.pk ASC LIMIT ?
        -- [65536,"sp(Patient.family)","sp(Patient.birthdate)","sp(Patient.name)","smi","smj",21]"
    `);
  });
  it('sorts on resource columns directly', () => {
    expect(
      compiled(d, 'Patient', '_sort=-_lastUpdated', { limit: 21, position: [1700000000000, 7], inlineBytes: 65536 }),
    ).toMatchInlineSnapshot(`
        "SELECT r0.pk, r0.id, r0.type, CASE WHEN octet_length(r0.content) <= ? THEN r0.content END AS content, octet_length(r0.content) AS content_bytes, r0.version AS content_version, r0.last_updated AS s0 FROM resource r0 WHERE (r0.type = ? AND r0.deleted = 0) AND (r0.last_updated < ? OR (r0.last_updated = ? AND r0.pk > ?)) ORDER BY r0.last_updated DESC, r0.pk ASC LIMIT ?
          -- [65536,"Patient",1700000000000,1700000000000,7,21]"
      `);
  });
  it('includes and revincludes by pk and by target', () => {
    const included = plan(
      'MedicationRequest',
      '_include=MedicationRequest:patient&_revinclude=Provenance:target',
    ).includes;
    const forward = bindInclude(compileInclude(d, included[0], 65536), [1, 2], 1001);
    const reverse = bindInclude(compileInclude(d, included[1], 65536), [['MedicationRequest', 'a']], 1001);
    expect(forward.params).toEqual([65536, '[1,2]', included[0].sps[0], 'Patient', 1001]);
    expect(reverse.params).toEqual([65536, included[1].sps[0], '["a"]', '["MedicationRequest/a"]', 'Provenance', 1001]);
    expect(`${forward.text}\n${reverse.text}`).toMatchInlineSnapshot(`
      "SELECT r.pk, r.id, r.type, CASE WHEN octet_length(r.content) <= ? THEN r.content END AS content, octet_length(r.content) AS content_bytes, r.version AS content_version FROM resource r WHERE r.pk IN (SELECT i.pk FROM idx_reference f JOIN resource i ON i.type = f.target_type AND i.id = f.target_id WHERE f.pk IN (SELECT value FROM json_each(?)) AND +f.sp = ? AND i.type = ?) AND r.deleted = 0 ORDER BY r.pk LIMIT ?
      SELECT r.pk, r.id, r.type, CASE WHEN octet_length(r.content) <= ? THEN r.content END AS content, octet_length(r.content) AS content_bytes, r.version AS content_version FROM resource r WHERE r.pk IN (SELECT f.pk FROM idx_reference f WHERE f.sp = ? AND f.target_id IN (SELECT value FROM json_each(?)) AND f.target_type || '/' || f.target_id IN (SELECT value FROM json_each(?))) AND r.deleted = 0 AND r.type = ? ORDER BY r.pk LIMIT ?"
    `);
  });
  it('counts without paging', () => {
    expect(compileCount(plan('Patient', 'name=smi'), d).text).toMatchInlineSnapshot(
      `"SELECT COUNT(*) AS n FROM resource r0 WHERE (r0.deleted = 0 AND r0.pk IN (SELECT t.pk FROM idx_string t WHERE t.sp = ? AND (t.norm >= ? AND t.norm < ?)))"`,
    );
  });
});

describe("a page's statements hold about its byte budget", () => {
  // The content columns come first in every such statement, so the inline limit is its first parameter.
  const inlineLimits = (statements: readonly { text: string; params: readonly unknown[] }[]) =>
    statements.map((s) => {
      expect(s.text).toMatch(/^SELECT r0?\.pk, r0?\.id, r0?\.type, CASE WHEN octet_length\(r0?\.content\) <= \? THEN/);
      return s.params[0];
    });
  const search = (query: string, count: number, maxPageBytes: number) =>
    compileSearchStatements(plan('Patient', query), sqliteDialect, { count, summaryCount: false, maxPageBytes });

  it('inlines contents up to 64 KiB when the budget covers that for every row', () => {
    const compiled = search('_revinclude=Encounter:subject', 20, 32 * 2 ** 20);
    expect(inlineLimits(compiled.page)).toEqual([65536]);
    // Includes read up to MAX_INCLUDED + 1 rows: 32 MiB / 1,001 gives 32 KiB each.
    expect(inlineLimits(compiled.includes.map((i) => i.statement))).toEqual([32768]);
  });

  it('inlines less per row when a large _count would multiply the budget', () => {
    const compiled = search('_sort=family', 1000, 32 * 2 ** 20);
    expect(compiled.page.length).toBeGreaterThan(1);
    expect(inlineLimits(compiled.page)).toEqual(compiled.page.map(() => 32768));
    expect(inlineLimits(search('gender=female', 100, 2 ** 20).page)).toEqual([8192]);
  });
});

describe('pinned SQL (PostgreSQL)', () => {
  const d = postgresDialect;
  it('drives with = ANY(ARRAY(...)) and keeps probes per row with OFFSET 0', () => {
    expect(compiled(d, 'Patient', 'name=smi&gender=female')).toMatchInlineSnapshot(`
      "/*adhoc*/ SELECT r0.pk, r0.id, r0.type, CASE WHEN octet_length(r0.content) <= ? THEN r0.content END AS content, octet_length(r0.content) AS content_bytes, r0.version AS content_version FROM resource r0 WHERE (r0.deleted = 0 AND r0.pk = ANY(ARRAY(SELECT t.pk FROM idx_string t WHERE t.sp = ? AND (t.norm >= ? AND t.norm < ?))) AND EXISTS (SELECT 1 FROM idx_token t WHERE t.pk = r0.pk AND (t.sp + 0) = ? AND t.code = ? OFFSET 0)) AND 1=1 ORDER BY r0.pk ASC LIMIT ?
        -- [65536,"sp(Patient.name)","smi","smj","sp(Patient.gender)","female",21]"
    `);
  });
  it('chains and reverse-chains', () => {
    expect(compiled(d, 'Encounter', 'patient.name=smith')).toMatchInlineSnapshot(`
      "/*adhoc*/ SELECT r0.pk, r0.id, r0.type, CASE WHEN octet_length(r0.content) <= ? THEN r0.content END AS content, octet_length(r0.content) AS content_bytes, r0.version AS content_version FROM resource r0 WHERE (r0.deleted = 0 AND r0.pk = ANY(ARRAY(SELECT f0.pk FROM idx_reference f0 WHERE f0.sp = ? AND f0.target_type = ? AND f0.target_id = ANY(ARRAY(SELECT r1.id FROM resource r1 WHERE (r1.deleted = 0 AND r1.pk = ANY(ARRAY(SELECT t.pk FROM idx_string t WHERE t.sp = ? AND (t.norm >= ? AND t.norm < ?))))))))) AND 1=1 ORDER BY r0.pk ASC LIMIT ?
        -- [65536,"sp(Encounter.patient)","Patient","sp(Patient.name)","smith","smiti",21]"
    `);
    expect(compiled(d, 'Patient', '_has:Observation:patient:code=1234-5')).toMatchInlineSnapshot(`
      "/*adhoc*/ SELECT r0.pk, r0.id, r0.type, CASE WHEN octet_length(r0.content) <= ? THEN r0.content END AS content, octet_length(r0.content) AS content_bytes, r0.version AS content_version FROM resource r0 WHERE (r0.deleted = 0 AND r0.pk = ANY(ARRAY(SELECT r2.pk FROM resource r2 WHERE r2.type = ? AND r2.id = ANY(ARRAY(SELECT f0.target_id FROM idx_reference f0 WHERE (f0.sp + 0) = ? AND f0.target_type = ? AND f0.pk = ANY(ARRAY(SELECT r1.pk FROM resource r1 WHERE (r1.deleted = 0 AND r1.pk = ANY(ARRAY(SELECT t.pk FROM idx_token t WHERE t.sp = ? AND t.code = ?)))))))))) AND 1=1 ORDER BY r0.pk ASC LIMIT ?
        -- [65536,"Patient","sp(Observation.patient)","Patient","sp(Observation.code)","1234-5",21]"
    `);
  });
});

/** The plan with `estimatedRows` set on the top-level criteria, in order (a chain or `_has` and its inner alike). */
function withEstimates(p: Plan, ...rows: number[]): Plan {
  const annotate = (c: PlannedCriterion, n: number): PlannedCriterion =>
    c.kind === 'chain' || c.kind === 'has'
      ? { ...c, inner: annotate(c.inner, n), estimatedRows: n }
      : { ...c, estimatedRows: n };
  return { ...p, criteria: p.criteria.map((c, i) => annotate(c, rows[i])) };
}

function page(p: Plan): string {
  return compileSearch(p, sqliteDialect, { limit: 21, inlineBytes: 65536 }).text;
}

describe('driver choice from estimates (SQLite)', () => {
  it('drives from the criterion with the fewest estimated rows, whatever its kind', () => {
    const p = plan('Patient', 'identifier=MRN1&name=smi');
    expect(page(withEstimates(p, 5000, 3))).toMatchInlineSnapshot(
      `"SELECT r0.pk, r0.id, r0.type, CASE WHEN octet_length(r0.content) <= ? THEN r0.content END AS content, octet_length(r0.content) AS content_bytes, r0.version AS content_version FROM resource r0 WHERE (r0.deleted = 0 AND EXISTS (SELECT 1 FROM idx_token t WHERE t.pk = r0.pk AND +t.sp = ? AND t.code = ?) AND r0.pk IN (SELECT t.pk FROM idx_string t WHERE t.sp = ? AND (t.norm >= ? AND t.norm < ?))) AND 1=1 ORDER BY r0.pk ASC LIMIT ?"`,
    );
    expect(page(withEstimates(p, 3, 5000))).toMatchInlineSnapshot(
      `"SELECT r0.pk, r0.id, r0.type, CASE WHEN octet_length(r0.content) <= ? THEN r0.content END AS content, octet_length(r0.content) AS content_bytes, r0.version AS content_version FROM resource r0 WHERE (r0.deleted = 0 AND r0.pk IN (SELECT t.pk FROM idx_token t WHERE t.sp = ? AND t.code = ?) AND EXISTS (SELECT 1 FROM idx_string t WHERE t.pk = r0.pk AND +t.sp = ? AND (t.norm >= ? AND t.norm < ?))) AND 1=1 ORDER BY r0.pk ASC LIMIT ?"`,
    );
  });
  it('walks the type and probes when every index criterion matches more than the cap', () => {
    expect(page(withEstimates(plan('Observation', 'code=1234-5'), ESTIMATE_CAP + 1))).toMatchInlineSnapshot(
      `"SELECT r0.pk, r0.id, r0.type, CASE WHEN octet_length(r0.content) <= ? THEN r0.content END AS content, octet_length(r0.content) AS content_bytes, r0.version AS content_version FROM resource r0 WHERE (r0.type = ? AND r0.deleted = 0 AND EXISTS (SELECT 1 FROM idx_token t WHERE t.pk = r0.pk AND +t.sp = ? AND t.code = ?)) AND 1=1 ORDER BY r0.pk ASC LIMIT ?"`,
    );
  });
  it('drives a chain only from a few inner matches (each brings all its referrers)', () => {
    const p = plan('Encounter', 'patient.name=smith');
    expect(page(withEstimates(p, CHAIN_DRIVE_LIMIT))).toContain('r0.pk IN (SELECT f0.pk FROM idx_reference f0');
    expect(page(withEstimates(p, CHAIN_DRIVE_LIMIT + 1))).toContain(
      'r0.type = ? AND r0.deleted = 0 AND EXISTS (SELECT 1 FROM idx_reference f0 JOIN resource r1',
    );
  });
  it('drives a _has from its inner criterion only when that is rare', () => {
    const p = plan('Patient', '_has:Observation:patient:code=1234-5');
    expect(page(withEstimates(p, JOIN_DRIVE_LIMIT))).toContain('r0.pk IN (SELECT r2.pk FROM resource r2');
    expect(page(withEstimates(p, JOIN_DRIVE_LIMIT + 1))).toMatchInlineSnapshot(
      `"SELECT r0.pk, r0.id, r0.type, CASE WHEN octet_length(r0.content) <= ? THEN r0.content END AS content, octet_length(r0.content) AS content_bytes, r0.version AS content_version FROM resource r0 WHERE (r0.type = ? AND r0.deleted = 0 AND EXISTS (SELECT 1 FROM idx_reference f0 JOIN resource r1 ON r1.pk = f0.pk WHERE f0.sp = ? AND f0.target_id = r0.id AND f0.target_type = r0.type AND r1.deleted = 0 AND EXISTS (SELECT 1 FROM idx_token t WHERE t.pk = r1.pk AND +t.sp = ? AND t.code = ?))) AND 1=1 ORDER BY r0.pk ASC LIMIT ?"`,
    );
  });
});

describe('statement hygiene', () => {
  it('never puts a value into SQL text', () => {
    const marker = 'zqxmarker';
    const queries = [
      `name=${marker}`,
      `identifier=${marker}|${marker}`,
      `general-practitioner.name=${marker}`,
      `_has:Observation:patient:code=${marker}`,
      `_id=${marker}`,
      `address:contains=${marker}`,
    ];
    for (const dialect of [sqliteDialect, postgresDialect]) {
      for (const query of queries) {
        const statement = compileSearch(plan('Patient', query, dialect), dialect, { limit: 21, inlineBytes: 65536 });
        expect(statement.text).not.toContain(marker);
        expect(statement.text.split('?').length - 1).toBe(statement.params.length);
      }
    }
  });
});

describe('pinned SQL of a compartment search', () => {
  const rule = registry.compartment('Patient')!;
  const inCompartment = (types: string[], query: string, estimatedRows?: number): Plan => {
    const base = planSearch(parseSearch([...new URLSearchParams(query)]), types, {
      catalog,
      references: catalog.references,
      now: Date.UTC(2025, 0, 1),
      strict: true,
      canSearch: () => true,
      dialect: sqliteDialect,
    });
    const criterion: PlannedCriterion = { ...compartmentCriterion(rule, 'p1', types), estimatedRows };
    return { ...base, criteria: [criterion, ...base.criteria] };
  };
  const text = (d: Dialect, p: Plan) => {
    const s = compileSearch(p, d, { limit: 21, inlineBytes: 65536 });
    return `${s.text}\n  -- ${JSON.stringify(named('Observation', s.params))}`;
  };

  it('drives from the reference index, with the patient itself for Patient (SQLite, PostgreSQL)', () => {
    expect(text(sqliteDialect, inCompartment(['Observation', 'Patient'], ''))).toMatchInlineSnapshot(`
      "SELECT r0.pk, r0.id, r0.type, CASE WHEN octet_length(r0.content) <= ? THEN r0.content END AS content, octet_length(r0.content) AS content_bytes, r0.version AS content_version FROM resource r0 WHERE (r0.deleted = 0 AND r0.pk IN (SELECT t.pk FROM idx_reference t WHERE t.sp IN (?, ?, ?) AND t.target_id = ? AND t.target_type = ? UNION ALL SELECT s.pk FROM resource s WHERE s.type = ? AND s.id = ?)) AND 1=1 ORDER BY r0.pk ASC LIMIT ?
        -- [65536,"sp(Observation.subject)","sp(Observation.performer)","sp(Patient.link)","p1","Patient","Patient","p1",21]"
    `);
    expect(text(postgresDialect, inCompartment(['Observation'], ''))).toMatchInlineSnapshot(`
      "/*adhoc*/ SELECT r0.pk, r0.id, r0.type, CASE WHEN octet_length(r0.content) <= ? THEN r0.content END AS content, octet_length(r0.content) AS content_bytes, r0.version AS content_version FROM resource r0 WHERE (r0.deleted = 0 AND r0.pk = ANY(ARRAY(SELECT t.pk FROM idx_reference t WHERE t.sp IN (?, ?) AND t.target_id = ? AND t.target_type = ?))) AND 1=1 ORDER BY r0.pk ASC LIMIT ?
        -- [65536,"sp(Observation.subject)","sp(Observation.performer)","p1","Patient",21]"
    `);
  });

  it('probes when another criterion drives', () => {
    expect(text(sqliteDialect, inCompartment(['Observation'], 'code=8302-2', 50_000))).toMatchInlineSnapshot(`
      "SELECT r0.pk, r0.id, r0.type, CASE WHEN octet_length(r0.content) <= ? THEN r0.content END AS content, octet_length(r0.content) AS content_bytes, r0.version AS content_version FROM resource r0 WHERE (r0.deleted = 0 AND EXISTS (SELECT 1 FROM idx_reference t WHERE t.pk = r0.pk AND +t.sp IN (?, ?) AND t.target_id = ? AND t.target_type = ?) AND r0.pk IN (SELECT t.pk FROM idx_token t WHERE t.sp = ? AND t.code = ?)) AND 1=1 ORDER BY r0.pk ASC LIMIT ?
        -- [65536,"sp(Observation.subject)","sp(Observation.performer)","p1","Patient","sp(Observation.code)","8302-2",21]"
    `);
  });
});

describe('value lists: one statement text whatever their length', () => {
  // Every distinct text is a prepared statement the database keeps (issue 23, item 5): an OR list of n
  // values must not make n texts. Each list is bound as one parameter (Dialect.equalsAny).
  const lists: [type: string, query: (values: string[]) => string][] = [
    ['Observation', (v) => `code=${v.join(',')}`],
    ['Observation', (v) => `code=${v.map((x) => `http://loinc.org|${x}`).join(',')}`],
    ['Observation', (v) => `code=${v.map((x) => `http://s/${x}|`).join(',')}`],
    ['Patient', (v) => `identifier:of-type=${v.map((x) => `http://t|MR|${x}`).join(',')}`],
    ['Encounter', (v) => `subject:identifier=${v.map((x) => `http://h|${x}`).join(',')}`],
    ['Encounter', (v) => `subject=${v.join(',')}`],
    ['Encounter', (v) => `subject=${v.map((x) => `Patient/${x}`).join(',')}`],
    ['Encounter', (v) => `subject:Group=${v.join(',')}`],
    ['ValueSet', (v) => `url=${v.map((x) => `http://vs/${x}`).join(',')}`],
    ['ValueSet', (v) => `url:above=${v.map((x) => `http://vs/${x}/a/b`).join(',')}`],
    ['Patient', (v) => `_id=${v.join(',')}`],
    ['Patient', (v) => `name:exact=${v.join(',')}`],
    ['Patient', (v) => `family:not=${v.join(',')}`],
    // Values longer than an index key (tables.ts INDEX_KEY_LENGTH): their keys and whole values, each a list.
    ['Observation', (v) => `code=${v.map((x) => `${'L'.repeat(300)}${x}`).join(',')}`],
    ['Observation', (v) => `code=${v.map((x, i) => `http://loinc.org|${i % 2 ? x : 'L'.repeat(300) + x}`).join(',')}`],
    ['Encounter', (v) => `subject:Patient._id=${v.join(',')}`],
  ];
  const values = (n: number, seed: string) => Array.from({ length: n }, (_, k) => `${seed}${k}`);

  for (const dialect of [sqliteDialect, postgresDialect]) {
    it(`${dialect.name}: 4, 10 and 1,000 values compile to one text, every value bound`, () => {
      for (const [type, query] of lists) {
        const texts = new Set<string>();
        for (const [n, seed] of [
          [4, 'a'],
          [10, 'b'],
          [1000, 'c'],
        ] as const) {
          const vs = values(n, seed);
          const statement = compileSearch(plan(type, query(vs), dialect), dialect, { limit: 21, inlineBytes: 65536 });
          texts.add(statement.text);
          for (const v of vs) expect(statement.text).not.toContain(v);
          expect(statement.text.split('?').length - 1).toBe(statement.params.length);
          expect(JSON.stringify(statement.params)).toContain(vs[n - 1]);
        }
        expect([...texts], query(['x', 'y'])).toHaveLength(1);
      }
    });
  }

  it('pins the lists (SQLite: json_each, PostgreSQL: arrays)', () => {
    const q = 'code=a,b,http://loinc.org|c,http://loinc.org|d,http://s|,http://t|';
    expect(compiled(sqliteDialect, 'Observation', q)).toMatchInlineSnapshot(`
      "SELECT r0.pk, r0.id, r0.type, CASE WHEN octet_length(r0.content) <= ? THEN r0.content END AS content, octet_length(r0.content) AS content_bytes, r0.version AS content_version FROM resource r0 WHERE (r0.type = ? AND r0.deleted = 0 AND EXISTS (SELECT 1 FROM idx_token t WHERE t.pk = r0.pk AND +t.sp = ? AND (t.code IN (SELECT value FROM json_each(?)) OR (t.code, t.system) IN (SELECT value ->> 0, value ->> 1 FROM json_each(?)) OR (t.system IN (SELECT value FROM json_each(?)) AND t.code <> '')))) AND 1=1 ORDER BY r0.pk ASC LIMIT ?
        -- [65536,"Observation","sp(Observation.code)","[\\"a\\",\\"b\\"]","[[\\"c\\",\\"http://loinc.org\\"],[\\"d\\",\\"http://loinc.org\\"]]","[\\"http://s\\",\\"http://t\\"]",21]"
    `);
    expect(compiled(postgresDialect, 'Observation', q)).toMatchInlineSnapshot(`
      "/*adhoc*/ SELECT r0.pk, r0.id, r0.type, CASE WHEN octet_length(r0.content) <= ? THEN r0.content END AS content, octet_length(r0.content) AS content_bytes, r0.version AS content_version FROM resource r0 WHERE (r0.type = ? AND r0.deleted = 0 AND EXISTS (SELECT 1 FROM idx_token t WHERE t.pk = r0.pk AND (t.sp + 0) = ? AND (t.code = ANY(?::text[]) OR (t.code, t.system) IN (SELECT * FROM unnest(?::text[], ?::text[])) OR (t.system = ANY(?::text[]) AND t.code <> '')) OFFSET 0)) AND 1=1 ORDER BY r0.pk ASC LIMIT ?
        -- [65536,"Observation","sp(Observation.code)","{\\"a\\",\\"b\\"}","{\\"c\\",\\"d\\"}","{\\"http://loinc.org\\",\\"http://loinc.org\\"}","{\\"http://s\\",\\"http://t\\"}",21]"
    `);
    expect(compiled(sqliteDialect, 'Encounter', 'subject=p1,p2,Group/g1,Patient/p3')).toMatchInlineSnapshot(`
      "SELECT r0.pk, r0.id, r0.type, CASE WHEN octet_length(r0.content) <= ? THEN r0.content END AS content, octet_length(r0.content) AS content_bytes, r0.version AS content_version FROM resource r0 WHERE (r0.deleted = 0 AND r0.pk IN (SELECT t.pk FROM idx_reference t WHERE t.sp = ? AND ((t.target_id IN (SELECT value FROM json_each(?)) AND t.target_type <> '') OR (t.target_id, t.target_type) IN (SELECT value ->> 0, value ->> 1 FROM json_each(?))))) AND 1=1 ORDER BY r0.pk ASC LIMIT ?
        -- [65536,"sp(Encounter.subject)","[\\"p1\\",\\"p2\\"]","[[\\"g1\\",\\"Group\\"],[\\"p3\\",\\"Patient\\"]]",21]"
    `);
    expect(compiled(postgresDialect, 'Encounter', 'subject=p1,p2,Group/g1,Patient/p3')).toMatchInlineSnapshot(`
      "/*adhoc*/ SELECT r0.pk, r0.id, r0.type, CASE WHEN octet_length(r0.content) <= ? THEN r0.content END AS content, octet_length(r0.content) AS content_bytes, r0.version AS content_version FROM resource r0 WHERE (r0.deleted = 0 AND r0.pk = ANY(ARRAY(SELECT t.pk FROM idx_reference t WHERE t.sp = ? AND ((t.target_id = ANY(?::text[]) AND t.target_type <> '') OR (t.target_id, t.target_type) IN (SELECT * FROM unnest(?::text[], ?::text[])))))) AND 1=1 ORDER BY r0.pk ASC LIMIT ?
        -- [65536,"sp(Encounter.subject)","{\\"p1\\",\\"p2\\"}","{\\"g1\\",\\"p3\\"}","{\\"Group\\",\\"Patient\\"}",21]"
    `);
    expect(compiled(sqliteDialect, 'Patient', '_id=p1,p2&gender=female')).toMatchInlineSnapshot(`
      "SELECT r0.pk, r0.id, r0.type, CASE WHEN octet_length(r0.content) <= ? THEN r0.content END AS content, octet_length(r0.content) AS content_bytes, r0.version AS content_version FROM resource r0 WHERE (r0.deleted = 0 AND r0.pk IN (SELECT s0.pk FROM resource s0 WHERE s0.type = ? AND s0.id IN (SELECT value FROM json_each(?))) AND EXISTS (SELECT 1 FROM idx_token t WHERE t.pk = r0.pk AND +t.sp = ? AND t.code = ?)) AND 1=1 ORDER BY r0.pk ASC LIMIT ?
        -- [65536,"Patient","[\\"p1\\",\\"p2\\"]","sp(Patient.gender)","female",21]"
    `);
    expect(compiled(postgresDialect, 'Patient', '_id=p1,p2&gender=female')).toMatchInlineSnapshot(`
      "/*adhoc*/ SELECT r0.pk, r0.id, r0.type, CASE WHEN octet_length(r0.content) <= ? THEN r0.content END AS content, octet_length(r0.content) AS content_bytes, r0.version AS content_version FROM resource r0 WHERE (r0.deleted = 0 AND r0.pk = ANY(ARRAY(SELECT s0.pk FROM resource s0 WHERE s0.type = ? AND s0.id = ANY(?::text[]))) AND EXISTS (SELECT 1 FROM idx_token t WHERE t.pk = r0.pk AND (t.sp + 0) = ? AND t.code = ? OFFSET 0)) AND 1=1 ORDER BY r0.pk ASC LIMIT ?
        -- [65536,"Patient","{\\"p1\\",\\"p2\\"}","sp(Patient.gender)","female",21]"
    `);
  });
});
