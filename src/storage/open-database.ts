import { PostgresDatabase } from './postgres/postgres-database.js';
import type { SqlDatabase } from './sql/database.js';
import { SqliteDatabase } from './sqlite/sqlite-database.js';

/** Opens the database DATABASE_URL names (docs/api.md: sqlite:<path>, sqlite::memory:, postgres://...). */
export function openDatabase(
  databaseUrl: string,
  options: {
    sqliteSynchronous?: 'full' | 'normal';
    searchWorkers?: number;
    postgresPooler?: 'none' | 'transaction';
    databaseReadUrls?: readonly string[];
    replicaMaxLagMs?: number;
    /** The process loads data in large transactions (`import`). */
    bulkLoad?: boolean;
    /** SQLite: a write transaction's statement running longer is stopped (sqlite-database.ts). */
    requestTimeoutMs?: number;
  } = {},
): SqlDatabase {
  if (/^postgres(ql)?:\/\//.test(databaseUrl)) {
    return new PostgresDatabase(databaseUrl, {
      transactionPooling: options.postgresPooler === 'transaction',
      readUrls: options.databaseReadUrls,
      replicaMaxLagMs: options.replicaMaxLagMs,
    });
  }
  return new SqliteDatabase(databaseUrl, {
    synchronous: options.sqliteSynchronous,
    readWorkers: options.searchWorkers,
    bulkLoad: options.bulkLoad,
    writeStatementLimitMs: options.requestTimeoutMs,
  });
}
