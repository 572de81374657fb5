// When the server refreshes PostgreSQL's statistics (engine.ts StatisticsKeeper): an ANALYZE at most every
// 10 s while writes go on, a VACUUM (ANALYZE) once they pause, never two at once, never on SQLite.
import { describe, expect, it } from 'vitest';
import type { SqlDatabase } from '../storage/sql/database.js';
import { postgresDialect, sqliteDialect } from '../storage/sql/dialect.js';
import { StatisticsKeeper } from './engine.js';

function keeper(dialect = postgresDialect) {
  const executed: string[] = [];
  let finish: (() => void) | undefined;
  const db = {
    dialect,
    execute: (statement: string) => {
      executed.push(statement.split(' ')[0] === 'VACUUM' ? 'VACUUM' : 'ANALYZE');
      return new Promise<number>((resolve) => (finish = () => resolve(0)));
    },
  } as unknown as SqlDatabase;
  const clock = { now: 100_000 };
  const statistics = new StatisticsKeeper(db, () => clock.now);
  const settle = async () => {
    finish?.();
    finish = undefined;
    await new Promise((resolve) => setImmediate(resolve));
  };
  const write = (n: number) => {
    for (let i = 0; i < n; i++) statistics.wrote();
  };
  return { statistics, executed, clock, settle, write };
}

describe('StatisticsKeeper', () => {
  it('analyzes while writes go on, at most every 10 s, and vacuums once they pause', async () => {
    const { statistics, executed, clock, settle, write } = keeper();
    write(999);
    statistics.beforeSearch();
    expect(executed).toEqual([]);
    write(1);
    statistics.beforeSearch();
    expect(executed).toEqual(['ANALYZE']);
    // One at a time.
    write(1000);
    statistics.beforeSearch();
    expect(executed).toEqual(['ANALYZE']);
    await settle();
    clock.now += 5_000;
    write(1000);
    statistics.beforeSearch();
    expect(executed).toEqual(['ANALYZE']);
    // A second without writes: what was written since the last VACUUM is vacuumed.
    clock.now += 1_000;
    statistics.beforeSearch();
    expect(executed).toEqual(['ANALYZE', 'VACUUM']);
    await settle();
    clock.now += 60_000;
    statistics.beforeSearch();
    expect(executed).toEqual(['ANALYZE', 'VACUUM']);
  });

  it('never refreshes SQLite', () => {
    const { statistics, executed, clock, write } = keeper(sqliteDialect);
    write(5000);
    clock.now += 60_000;
    statistics.beforeSearch();
    expect(executed).toEqual([]);
  });
});
