// The estimates that choose the driving criterion (estimate.ts): counted from the index, per criterion
// at any depth, and cached for a minute so that repeated searches pay nothing for them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SqlDatabase } from '../storage/sql/database.js';
import { BACKENDS } from '../../test/support/databases.js';
import { CardinalityEstimator } from './estimate.js';
import type { StatementRunner } from './estimate.js';
import { parseSearch } from './parse.js';
import { planSearch } from './plan.js';
import type { Plan } from './plan.js';
import { createSearchTestEnv } from '../../test/support/search-env.js';
import type { SearchTestEnv } from '../../test/support/search-env.js';
import { FIXTURE } from '../../test/support/search-fixtures.js';

describe.each(BACKENDS)('cardinality estimates on %s', (backend) => {
  let env: SearchTestEnv;

  beforeAll(async () => {
    env = await createSearchTestEnv(backend);
    for (const resource of FIXTURE) await env.store.update(structuredClone(resource));
  });

  afterAll(async () => {
    await env?.dispose();
  });

  function plan(type: string, query: string): Plan {
    return planSearch(parseSearch([...new URLSearchParams(query)]), [type], {
      catalog: env.engine.catalog,
      references: env.engine.catalog.references,
      now: Date.now(),
      strict: true,
      canSearch: () => true,
      dialect: env.db.dialect,
    });
  }

  /** Runs the estimator's counts straight on the database (the engine runs them within a search budget). */
  function runner(db: SqlDatabase): StatementRunner {
    return (statement) => db.query(statement.text, statement.params);
  }

  /** The database, counting the statements that reach it. */
  function counting(db: SqlDatabase): { db: SqlDatabase; statements: () => number } {
    let statements = 0;
    const wrapped = Object.create(db) as SqlDatabase;
    wrapped.query = (sql, params) => {
      statements++;
      return db.query(sql, params);
    };
    return { db: wrapped, statements: () => statements };
  }

  async function indexRows(table: string, where: string, params: unknown[]): Promise<number> {
    const [row] = await env.db.query<{ n: number | string }>(
      `SELECT COUNT(*) AS n FROM ${table} WHERE ${where}`,
      params as never[],
    );
    return Number(row.n);
  }

  it('counts the index rows each candidate matches, and a _has by its inner criterion', async () => {
    const estimator = new CardinalityEstimator(env.db.dialect);
    const estimated = await estimator.estimate(
      plan('Patient', 'name=smi&gender=female&_has:Observation:patient:code=http://loinc.org|29463-7'),
      runner(env.db),
    );
    const [name, gender, has] = estimated.criteria;
    const nameSp = env.engine.catalog.param('Patient', 'name')!.sp;
    const codeSp = env.engine.catalog.param('Observation', 'code')!.sp;
    expect(name.estimatedRows).toBe(
      await indexRows('idx_string', 'sp = ? AND norm >= ? AND norm < ?', [nameSp, 'smi', 'smj']),
    );
    expect(name.estimatedRows).toBeGreaterThan(0);
    // gender is never selective enough to drive: not estimated.
    expect(gender.estimatedRows).toBeUndefined();
    expect(has.kind).toBe('has');
    const inner = has.kind === 'has' ? has.inner : undefined;
    const weights = await indexRows('idx_token', 'sp = ? AND code = ? AND system = ?', [
      codeSp,
      '29463-7',
      'http://loinc.org',
    ]);
    expect(weights).toBeGreaterThan(0);
    expect(inner?.estimatedRows).toBe(weights);
    expect(has.estimatedRows).toBe(weights);
  });

  it('caches each count for a minute', async () => {
    const { db, statements } = counting(env.db);
    let now = 1_000_000;
    const estimator = new CardinalityEstimator(db.dialect, () => now);
    const p = plan('Patient', 'name=smi');
    await estimator.estimate(p, runner(db));
    expect(statements()).toBe(1);
    now += 59_000;
    await estimator.estimate(p, runner(db));
    expect(statements()).toBe(1);
    now += 2_000;
    await estimator.estimate(p, runner(db));
    expect(statements()).toBe(2);
  });

  it('estimates nothing when a reference is the only candidate, and always counts codes', async () => {
    const { db, statements } = counting(env.db);
    const estimator = new CardinalityEstimator(db.dialect);
    for (const [type, query] of [
      ['Encounter', 'patient=Patient/p1'],
      ['Encounter', 'patient=Patient/p1&status=finished'],
    ] as const) {
      const p = plan(type, query);
      expect(await estimator.estimate(p, runner(db))).toBe(p);
    }
    expect(statements()).toBe(0);
    // With a second candidate the counts choose between them.
    await estimator.estimate(plan('Encounter', 'patient=Patient/p1&date=2021-03-05'), runner(db));
    expect(statements()).toBe(2);
    // A code with digits may be rare or everywhere: counted alone, and inside a _has.
    const code = await estimator.estimate(plan('Observation', 'code=http://loinc.org|29463-7'), runner(db));
    expect(code.criteria[0].estimatedRows).toBeGreaterThan(0);
    const has = await estimator.estimate(
      plan('Patient', '_has:Observation:patient:code=http://loinc.org|29463-7'),
      runner(db),
    );
    expect(has.criteria[0].estimatedRows).toBe(code.criteria[0].estimatedRows);
  });

  it('searches without estimates when counting fails', async () => {
    const failing = Object.create(env.db) as SqlDatabase;
    failing.query = () => Promise.reject(new Error('canceling statement due to statement timeout'));
    const p = plan('Patient', 'name=smi&birthdate=2001');
    expect(await new CardinalityEstimator(failing.dialect).estimate(p, runner(failing))).toBe(p);
  });

  it('counts a two-letter string prefix, so that a rare one drives; a single letter is never counted', async () => {
    const { db, statements } = counting(env.db);
    const estimator = new CardinalityEstimator(db.dialect);
    const two = await estimator.estimate(plan('Patient', 'name=sm&birthdate=ge1980'), runner(db));
    const nameSp = env.engine.catalog.param('Patient', 'name')!.sp;
    expect(two.criteria[0].estimatedRows).toBe(
      await indexRows('idx_string', 'sp = ? AND norm >= ? AND norm < ?', [nameSp, 'sm', 'sn']),
    );
    expect(statements()).toBe(1);
    const one = plan('Patient', 'name=s&birthdate=ge1980');
    expect(await estimator.estimate(one, runner(db))).toBe(one);
    expect(statements()).toBe(1);
  });

  it('estimates nothing when no criterion could drive', async () => {
    const { db, statements } = counting(env.db);
    const estimator = new CardinalityEstimator(db.dialect);
    const p = plan('Patient', 'gender=female&birthdate=ge1980');
    expect(await estimator.estimate(p, runner(db))).toBe(p);
    expect(statements()).toBe(0);
  });
});
