import type { SqlDatabase } from './sql/database.js';
import type { Migration } from './migrations/migration.js';
import { MIGRATIONS } from './migrations/index.js';

// Several processes may start on one database at once: the dialect's transaction lock on one key
// serialises them (an advisory lock on PostgreSQL; on SQLite, where it is undefined, BEGIN IMMEDIATE,
// the transaction itself, does).
const MIGRATION_LOCK_KEY = 'ambient-fhir:schema-migration';

/** Creates or upgrades the schema; returns the versions it applied. */
export async function migrate(db: SqlDatabase, migrations: readonly Migration[] = MIGRATIONS): Promise<number[]> {
  return db.transaction(async (tx) => {
    const lock = tx.dialect.transactionLock;
    if (lock !== undefined) await tx.query(lock, [MIGRATION_LOCK_KEY]);
    await tx.execute(
      `CREATE TABLE IF NOT EXISTS schema_migration (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`,
    );
    const applied = new Set(
      (await tx.query<{ version: number }>('SELECT version FROM schema_migration')).map((r) => r.version),
    );
    const newlyApplied: number[] = [];
    for (const migration of [...migrations].sort((a, b) => a.version - b.version)) {
      if (applied.has(migration.version)) continue;
      for (const statement of migration.statements(tx.dialect)) await tx.execute(statement);
      await tx.execute('INSERT INTO schema_migration (version, name, applied_at) VALUES (?, ?, ?)', [
        migration.version,
        migration.name,
        new Date().toISOString(),
      ]);
      newlyApplied.push(migration.version);
    }
    return newlyApplied;
  });
}
