import { createHash } from 'node:crypto';
import pg from 'pg';
import { budgetLeft, BudgetExceededError, SerializationError, UniqueViolationError } from '../sql/database.js';
import type { ReadBudget, Row, SqlDatabase, SqlExecutor, SqlValue } from '../sql/database.js';
import { PG_QUERY_CANCELED, postgresDialect } from '../sql/dialect.js';

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
  /**
   * Searches get connections of their own, each with `statement_timeout` set to the search budget: a
   * slow search never holds a connection a write or a read by id needs, and the server stops it even
   * if this process dies. Created on the first search.
   */
  private searchPool: pg.Pool | undefined;

  constructor(
    private readonly databaseUrl: string,
    poolSize = 10,
    private readonly searchPoolSize = poolSize,
  ) {
    this.pool = new pg.Pool({ connectionString: databaseUrl, max: poolSize, types });
    // An idle client losing its connection must not crash the process; the pool replaces it.
    this.pool.on('error', () => undefined);
    this.executor = new ClientExecutor(this.pool);
  }

  private searches(limitMs: number): pg.Pool {
    if (this.searchPool) return this.searchPool;
    const pool = new pg.Pool({
      connectionString: this.databaseUrl,
      max: this.searchPoolSize,
      types,
      // Waiting for a connection counts against the budget too.
      connectionTimeoutMillis: limitMs,
    });
    pool.on('error', () => undefined);
    // Queued before the first statement the connection runs, so no search ever runs without it.
    pool.on(
      'connect',
      (client) => void client.query(`SET statement_timeout = ${Math.ceil(limitMs)}`).catch(() => undefined),
    );
    this.searchPool = pool;
    return pool;
  }

  /** Connections of each pool (for metrics): the main one, and the search one once it exists. */
  poolStats(): { pool: 'main' | 'search'; total: number; idle: number; waiting: number }[] {
    const stats = (pool: 'main' | 'search', p: pg.Pool) => ({
      pool,
      total: p.totalCount,
      idle: p.idleCount,
      waiting: p.waitingCount,
    });
    return [stats('main', this.pool), ...(this.searchPool ? [stats('search', this.searchPool)] : [])];
  }

  async warmUp(): Promise<void> {
    // Search connections are made on demand; each costs one round trip more, once.
  }

  /**
   * A search statement on the search pool. The server stops it at `statement_timeout` (the whole
   * budget); within that, this process cancels it (pg_cancel_backend from another connection) once the
   * search's own deadline passes or its client goes away, so nothing runs on after the answer.
   */
  async boundedQuery<T = Row>(sql: string, params: readonly SqlValue[], budget: ReadBudget): Promise<T[]> {
    budgetLeft(budget);
    let client: pg.PoolClient;
    try {
      client = await this.searches(budget.limitMs).connect();
    } catch (error) {
      // Waiting for a connection past the deadline is the budget's error, not the pool's.
      budgetLeft(budget);
      throw error;
    }
    let cancelled: 'deadline' | 'aborted' | undefined;
    const cancel = (reason: 'deadline' | 'aborted') => {
      if (cancelled) return;
      cancelled = reason;
      void this.pool
        .query('SELECT pg_cancel_backend($1)', [(client as unknown as { processID: number }).processID])
        .catch(() => undefined);
    };
    const onAbort = () => cancel('aborted');
    let timer: NodeJS.Timeout | undefined;
    try {
      timer = setTimeout(() => cancel('deadline'), budgetLeft(budget));
      budget.signal?.addEventListener('abort', onAbort, { once: true });
      return await new ClientExecutor(client).query<T>(sql, params);
    } catch (error) {
      if ((error as { code?: string }).code === PG_QUERY_CANCELED) {
        throw new BudgetExceededError(budget.limitMs, cancelled ?? 'deadline');
      }
      throw error;
    } finally {
      clearTimeout(timer);
      budget.signal?.removeEventListener('abort', onAbort);
      // A cancel may still be on its way to this backend: never hand the connection to another search.
      client.release(cancelled !== undefined);
    }
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
    await this.searchPool?.end();
    await this.pool.end();
  }
}
