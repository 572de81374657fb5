import { createHash } from 'node:crypto';
import pg from 'pg';
import { SerializationError, UniqueViolationError } from '../sql/database.js';
import type { Row, SqlDatabase, SqlExecutor, SqlValue } from '../sql/database.js';
import { postgresDialect } from '../sql/dialect.js';

// BIGINT (20) and NUMERIC (1700) arrive as strings by default; our values fit in a double.
const types = {
  getTypeParser: (oid: number, format?: string) => {
    if (oid === 20 || oid === 1700) return (value: string) => Number(value);
    return pg.types.getTypeParser(oid, format as 'text');
  },
};

function translateErrors(error: unknown): never {
  const code = (error as { code?: string }).code;
  if (code === '23505') throw new UniqueViolationError(error);
  if (code === '40001' || code === '40P01') throw new SerializationError(error);
  throw error;
}

/**
 * Named statements are prepared once per connection and reused: fewer round trips to plan. Statements
 * whose text depends on the request (searches, marked with the dialect's `adhocStatement` prefix) stay
 * unnamed: PostgreSQL plans them for their actual values every time (a named one may switch to a
 * generic plan after five runs, which made a token search 20x slower here), and they do not pile up as
 * prepared statements on every connection.
 */
function statementName(sql: string): string | undefined {
  if (sql.startsWith(postgresDialect.adhocStatement)) return undefined;
  return 'q' + createHash('sha1').update(sql).digest('base64url').slice(0, 20);
}

class ClientExecutor implements SqlExecutor {
  readonly dialect = postgresDialect;

  constructor(private readonly client: pg.Pool | pg.PoolClient) {}

  async query<T = Row>(sql: string, params: readonly SqlValue[] = []): Promise<T[]> {
    const text = postgresDialect.placeholders(sql);
    try {
      const result = await this.client.query({ name: statementName(text), text, values: params as unknown[] });
      return result.rows as T[];
    } catch (error) {
      translateErrors(error);
    }
  }

  async execute(sql: string, params: readonly SqlValue[] = []): Promise<number> {
    const text = postgresDialect.placeholders(sql);
    try {
      const result = await this.client.query({ name: statementName(text), text, values: params as unknown[] });
      return result.rowCount ?? 0;
    } catch (error) {
      translateErrors(error);
    }
  }
}

export class PostgresDatabase implements SqlDatabase {
  readonly dialect = postgresDialect;
  private readonly pool: pg.Pool;
  private readonly executor: ClientExecutor;

  constructor(databaseUrl: string, poolSize = 10) {
    this.pool = new pg.Pool({ connectionString: databaseUrl, max: poolSize, types });
    // An idle client losing its connection must not crash the process; the pool replaces it.
    this.pool.on('error', () => undefined);
    this.executor = new ClientExecutor(this.pool);
  }

  query<T = Row>(sql: string, params?: readonly SqlValue[]): Promise<T[]> {
    return this.executor.query<T>(sql, params);
  }

  execute(sql: string, params?: readonly SqlValue[]): Promise<number> {
    return this.executor.execute(sql, params);
  }

  async transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      try {
        const result = await fn(new ClientExecutor(client));
        await client.query('COMMIT');
        return result;
      } catch (error) {
        await client.query('ROLLBACK').catch(() => undefined);
        if (error instanceof Error && 'code' in error) translateErrors(error);
        throw error;
      }
    } finally {
      client.release();
    }
  }

  async executeScript(sql: string): Promise<void> {
    await this.pool.query(sql);
  }

  async ping(): Promise<void> {
    await this.pool.query('SELECT 1');
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}
