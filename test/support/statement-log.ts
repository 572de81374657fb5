// Counting what a path sends to the database, for tests that pin "one statement" promises: the
// database (or a transaction's executor) with the text of every statement it runs recorded in order.
import type { SqlDatabase, SqlExecutor } from '../../src/storage/sql/database.js';

/** One entry per statement: its text, and `BEGIN` … `COMMIT` (or `ROLLBACK`) around a transaction's. */
export type StatementLog = string[];

/** `db`, recording into `log` every statement it runs, those of its transactions included. */
export function logStatements<T extends SqlExecutor>(db: T, log: StatementLog): T {
  return new Proxy(db, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown;
      if (typeof value !== 'function') return value;
      if (property === 'query' || property === 'execute' || property === 'boundedQuery' || property === 'queryUntil') {
        return (sql: string, ...rest: unknown[]) => {
          log.push(sql);
          return (value as (...args: unknown[]) => unknown).call(target, sql, ...rest);
        };
      }
      if (property === 'transaction') {
        return async (fn: (tx: SqlExecutor) => Promise<unknown>) => {
          log.push('BEGIN');
          try {
            const result = await (target as unknown as SqlDatabase).transaction((tx) => fn(logStatements(tx, log)));
            log.push('COMMIT');
            return result;
          } catch (error) {
            log.push('ROLLBACK');
            throw error;
          }
        };
      }
      return (value as (...args: unknown[]) => unknown).bind(target);
    },
  });
}
