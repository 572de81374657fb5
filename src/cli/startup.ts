// What every command does before its work: read the configuration (reporting unknown AMBIENT_* names)
// and open the database, turning each failure into one line that names the setting to fix.
import type { Config, ConfigOptions } from '../config.js';
import { ConfigError, loadConfig } from '../config.js';
import { migrate } from '../storage/migrate.js';
import { databaseLabel } from '../storage/database-url.js';
import { openDatabase } from '../storage/open-database.js';
import type { SqlDatabase } from '../storage/sql/database.js';
import type { CliIo } from './command.js';
import { StartupError } from './command.js';
import { databaseFailure, oneLine } from './failures.js';

/** The configuration from io.env; warnings (an unknown AMBIENT_* name) go to stderr, one line each. */
export function loadCliConfig(io: Pick<CliIo, 'env' | 'stderr'>, options: ConfigOptions = {}): Readonly<Config> {
  try {
    return loadConfig(io.env, { warn: (line) => io.stderr.write(`warning: ${line}\n`), ...options });
  } catch (error) {
    if (error instanceof ConfigError) throw new StartupError(oneLine(error));
    throw error;
  }
}

/** Opens and migrates the database DATABASE_URL names; a failure names DATABASE_URL (without its password). */
export async function openCliDatabase(
  config: Config,
  options: Parameters<typeof openDatabase>[1] = config,
): Promise<SqlDatabase> {
  let db: SqlDatabase | undefined;
  try {
    db = openDatabase(config.databaseUrl, options);
    await migrate(db);
    return db;
  } catch (error) {
    await db?.close().catch(() => undefined);
    throw databaseFailure(config.databaseUrl, error);
  }
}

/**
 * Opens (and migrates) the database DATABASE_URL names, runs fn, and closes it; names the database on
 * standard error (standard output stays the command's JSON), so that a command run from another
 * directory, or with a mistyped DATABASE_URL, says where it worked.
 */
export async function withDatabase<T>(io: CliIo, fn: (db: SqlDatabase) => Promise<T>): Promise<T> {
  const config = loadCliConfig(io);
  const { label, new: created } = databaseLabel(config.databaseUrl);
  const db = await openCliDatabase(config);
  try {
    const result = await fn(db);
    io.stderr.write(`database: ${label}${created ? ' (created now: there was none at this path)' : ''}\n`);
    return result;
  } finally {
    await db.close();
  }
}
