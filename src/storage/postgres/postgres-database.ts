import { createHash } from 'node:crypto';
import pg from 'pg';
import {
  budgetLeft,
  BudgetExceededError,
  DatabaseUnavailableError,
  SerializationError,
  UniqueViolationError,
} from '../sql/database.js';
import type { ReadAfter, ReadBudget, Row, SqlDatabase, SqlExecutor, SqlValue } from '../sql/database.js';
import { PG_QUERY_CANCELED, postgresDialect } from '../sql/dialect.js';
import { ReplicaSet } from './replicas.js';

/**
 * Where a read a replica may answer went (DATABASE_READ_URLS): `replica`; or the primary because each
 * replica within the allowed lag has yet to replay the reader's last write (`primary-own-write`), none
 * answers within it (`primary-no-replica`), or the chosen one failed under the read (`primary-replica-failed`).
 */
export type ReadRouting = 'replica' | 'primary-own-write' | 'primary-no-replica' | 'primary-replica-failed';
import { parsePostgresTargets } from './targets.js';
import type { PostgresTargets } from './targets.js';

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
function statementName(sql: string, named: boolean): string | undefined {
  if (!named || sql.startsWith(postgresDialect.adhocStatement)) return undefined;
  return 'q' + createHash('sha1').update(sql).digest('base64url').slice(0, 20);
}

class ClientExecutor implements SqlExecutor {
  readonly dialect = postgresDialect;

  constructor(
    private readonly client: pg.Pool | pg.PoolClient,
    /** False behind a transaction pooler, where the next statement may reach another server connection. */
    private readonly named = true,
  ) {}

  async query<T = Row>(sql: string, params: readonly SqlValue[] = []): Promise<T[]> {
    const text = postgresDialect.placeholders(sql);
    try {
      const result = await this.client.query({
        name: statementName(text, this.named),
        text,
        values: params as unknown[],
      });
      return result.rows as T[];
    } catch (error) {
      translateErrors(error);
    }
  }

  async execute(sql: string, params: readonly SqlValue[] = []): Promise<number> {
    const text = postgresDialect.placeholders(sql);
    try {
      const result = await this.client.query({
        name: statementName(text, this.named),
        text,
        values: params as unknown[],
      });
      return result.rowCount ?? 0;
    } catch (error) {
      translateErrors(error);
    }
  }
}

/** How long a request waits for a server that accepts writes (the primary, or a promoted standby) before 503. */
const LOCATE_WAIT_MS = 5000;
const LOCATE_RETRY_MS = 250;
/** Each host gets this long to accept a connection when the writable one is looked for. */
const PROBE_TIMEOUT_MS = 2000;

/**
 * Whether an error means the connection or the server went away (so another server, or the same one
 * later, may answer), rather than something wrong with the statement: class 08 (connection exception),
 * 57P01-03 (shut down, crashed, starting up), 25006 (a read-only transaction: the server is a standby now,
 * e.g. a former primary brought back), and the socket errors of a server that is gone.
 */
export function isConnectionLost(error: unknown): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  if (typeof code === 'string') {
    if (code.startsWith('08') || ['57P01', '57P02', '57P03', '25006'].includes(code)) return true;
    if (['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH'].includes(code)) return true;
  }
  return typeof message === 'string' && /Connection terminated|connection timeout|Connection ended/i.test(message);
}

/**
 * What every connection this process opens runs with, sent in the startup packet (libpq's `options`,
 * after any the URL gives, so ours win): `jit=off`. A statement past `jit_above_cost` (a search with
 * a thousand OR'd terms) is compiled by LLVM first, and compiling checks for no interrupt: neither
 * `statement_timeout` nor `pg_cancel_backend` (nor `pg_terminate_backend`) stopped one before it had
 * compiled, 108 s into a 10 s budget. Our statements are short index probes, which JIT never speeds up.
 */
const SESSION_OPTIONS = '-c jit=off';

/** `url` with SESSION_OPTIONS appended to its `options` parameter. */
export function withSessionOptions(url: string): string {
  const queryAt = url.indexOf('?');
  const params = new URLSearchParams(queryAt >= 0 ? url.slice(queryAt + 1) : '');
  const given = params.get('options');
  params.set('options', given ? `${given} ${SESSION_OPTIONS}` : SESSION_OPTIONS);
  return `${queryAt >= 0 ? url.slice(0, queryAt) : url}?${params.toString()}`;
}

/**
 * The URL a connection to `url` is opened with. Behind a transaction pooler, none of ours: PgBouncer
 * refuses a startup `options` it does not track, and a session setting would not follow the client
 * anyway; there each search sets `jit = off` for its own transaction instead (boundedQueryOn, the
 * dialect's transactionStatementTimeout).
 */
function connectionUrl(url: string, transactionPooling: boolean): string {
  return transactionPooling ? url : withSessionOptions(url);
}

/** The pools of one server: the main one, and the searches' own once a search has run. */
class ServerPools {
  readonly main: pg.Pool;
  private searchPool: pg.Pool | undefined;

  constructor(
    readonly url: string,
    private readonly poolSize: number,
    private readonly searchPoolSize: number,
    /** Behind a transaction pooler (PgBouncer): nothing may outlive a transaction on a connection. */
    readonly transactionPooling: boolean,
  ) {
    this.main = new pg.Pool({ connectionString: connectionUrl(url, transactionPooling), max: poolSize, types });
    // A client losing its connection must not crash the process: idle, the pool replaces it; checked out
    // (between the statements of a transaction), node-postgres emits 'error' on the client itself, which
    // throws without a listener; the statement after it fails and is answered.
    this.main.on('error', () => undefined);
    this.main.on('connect', (client) => client.on('error', () => undefined));
  }

  /**
   * Searches get connections of their own, each with `statement_timeout` set to the search budget: a
   * slow search never holds a connection a write or a read by id needs, and the server stops it even
   * if this process dies. Created on the first search.
   */
  searches(limitMs: number): pg.Pool {
    if (this.searchPool) return this.searchPool;
    const pool = new pg.Pool({
      connectionString: connectionUrl(this.url, this.transactionPooling),
      max: this.searchPoolSize,
      types,
      // Waiting for a connection counts against the budget too.
      connectionTimeoutMillis: limitMs,
    });
    pool.on('error', () => undefined);
    // Queued before the first statement the connection runs, so no search ever runs without it.
    pool.on('connect', (client) => {
      client.on('error', () => undefined);
      // Behind a transaction pooler a session setting would land on whichever server connection the
      // pooler picks: the search sets it for its own transaction instead (boundedQueryOn).
      if (!this.transactionPooling) {
        void client.query(`SET statement_timeout = ${Math.ceil(limitMs)}`).catch(() => undefined);
      }
    });
    this.searchPool = pool;
    return pool;
  }

  stats(): { pool: 'main' | 'search'; total: number; idle: number; waiting: number }[] {
    const stats = (pool: 'main' | 'search', p: pg.Pool) => ({
      pool,
      total: p.totalCount,
      idle: p.idleCount,
      waiting: p.waitingCount,
    });
    return [stats('main', this.main), ...(this.searchPool ? [stats('search', this.searchPool)] : [])];
  }

  async end(): Promise<void> {
    await this.searchPool?.end();
    await this.main.end();
  }
}

/**
 * PostgreSQL through node-postgres. DATABASE_URL may name several hosts in libpq's form (targets.ts):
 * the server that accepts writes among them is found at the first request and again whenever the
 * connection to it is lost, so that after a failover (a standby promoted) the process writes to the new
 * primary within seconds. What was in flight when the connection went: reads are run again on the
 * server found next; writes fail with DatabaseUnavailableError (503, Retry-After), never half done,
 * since a transaction that did not commit is rolled back by the server.
 */
export class PostgresDatabase implements SqlDatabase {
  /** Processes on several hosts may share the database: nothing is kept beside it. */
  readonly localFolder = undefined;
  readonly dialect = postgresDialect;
  private readonly targets: PostgresTargets;
  /** The pools of the server in use; undefined until one is found (or after it was lost). */
  private current: ServerPools | undefined;
  private locating: Promise<ServerPools> | undefined;
  private closed = false;
  private readonly replicas: ReplicaSet | undefined;
  private readonly replicaPoolsByUrl = new Map<string, ServerPools>();
  /** Told where each read a replica may answer went (metrics/metrics.ts counts them). */
  private readRouted: ((routing: ReadRouting) => void) | undefined;

  constructor(
    databaseUrl: string,
    private readonly options: {
      poolSize?: number;
      searchPoolSize?: number;
      transactionPooling?: boolean;
      /** DATABASE_READ_URLS: streaming replicas that searches may read from. */
      readUrls?: readonly string[];
      /** A replica further behind the primary than this is not read from. */
      replicaMaxLagMs?: number;
    } = {},
  ) {
    this.targets = parsePostgresTargets(databaseUrl);
    const readUrls = options.readUrls ?? [];
    if (readUrls.length > 0) {
      this.replicas = new ReplicaSet(
        readUrls,
        {
          primaryPosition: async () =>
            (await this.query<{ position: string }>('SELECT pg_current_wal_lsn()::text AS position'))[0].position,
          replayedPosition: async (url) => {
            const { rows } = await this.replicaPools(url).main.query(
              'SELECT pg_last_wal_replay_lsn()::text AS position',
            );
            return (rows[0] as { position: string | null }).position ?? '';
          },
        },
        options.replicaMaxLagMs ?? 5000,
      );
      this.replicas.start();
    }
    // One host and any server will do: no server to choose, so none is probed (no extra round trip);
    // node-postgres's pool reconnects to it on its own.
    if (!this.choosesServer) this.current = this.poolsFor(this.targets.urls[0]);
  }

  private poolsFor(url: string): ServerPools {
    const poolSize = this.options.poolSize ?? 10;
    return new ServerPools(url, poolSize, this.options.searchPoolSize ?? poolSize, this.transactionPooling);
  }

  /** AMBIENT_POSTGRES_POOLER=transaction: no named statements, no session settings. */
  private get transactionPooling(): boolean {
    return this.options.transactionPooling ?? false;
  }

  private replicaPools(url: string): ServerPools {
    let pools = this.replicaPoolsByUrl.get(url);
    if (!pools) {
      pools = this.poolsFor(url);
      this.replicaPoolsByUrl.set(url, pools);
    }
    return pools;
  }

  private get choosesServer(): boolean {
    return this.targets.urls.length > 1 || this.targets.targetSessionAttrs !== 'any';
  }

  private pools(): Promise<ServerPools> {
    if (this.closed) return Promise.reject(new Error('the database is closed'));
    return this.current ? Promise.resolve(this.current) : this.locate();
  }

  /** Looks for the server to use, the hosts in their order, for up to LOCATE_WAIT_MS (one search at a time). */
  private locate(): Promise<ServerPools> {
    this.locating ??= (async () => {
      const giveUp = Date.now() + LOCATE_WAIT_MS;
      let lastError: unknown;
      for (;;) {
        for (const url of this.targets.urls) {
          lastError = undefined;
          try {
            if (await this.acceptsWrites(url)) {
              this.current = this.poolsFor(url);
              return this.current;
            }
          } catch (error) {
            lastError = error;
          }
        }
        if (Date.now() >= giveUp || this.closed) {
          throw lastError === undefined
            ? new DatabaseUnavailableError(
                undefined,
                `none of DATABASE_URL's ${this.targets.urls.length} hosts accepts writes (all are standbys)`,
              )
            : new DatabaseUnavailableError(lastError);
        }
        await new Promise((resolve) => setTimeout(resolve, LOCATE_RETRY_MS));
      }
    })().finally(() => {
      this.locating = undefined;
    });
    return this.locating;
  }

  /** Connects to one host: true when it is what target_session_attrs asks for (for read-write: not a standby). */
  private async acceptsWrites(url: string): Promise<boolean> {
    const client = new pg.Client({
      connectionString: connectionUrl(url, this.transactionPooling),
      connectionTimeoutMillis: PROBE_TIMEOUT_MS,
    });
    client.on('error', () => undefined);
    try {
      await client.connect();
      if (this.targets.targetSessionAttrs === 'any') return true;
      const [row] = (await client.query('SELECT pg_is_in_recovery() AS standby')).rows as { standby: boolean }[];
      return row.standby === false;
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  /** The connection to `pools`' server is gone: the next operation looks for a server again. */
  private lost(pools: ServerPools): void {
    if (!this.choosesServer || this.current !== pools) return;
    this.current = undefined;
    void pools.end().catch(() => undefined);
  }

  /**
   * Runs `operation` on the server in use. A lost connection is a DatabaseUnavailableError, except that
   * an operation that changes nothing (`rerunnable`) is run once more on the server found next.
   */
  private async run<T>(rerunnable: boolean, operation: (pools: ServerPools) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const pools = await this.pools();
      try {
        return await operation(pools);
      } catch (error) {
        if (!isConnectionLost(error)) throw error;
        this.lost(pools);
        if (!rerunnable || attempt >= 2) throw new DatabaseUnavailableError(error);
      }
    }
  }

  /** Where reads a replica may answer go, as they go (one listener: the app's metrics). */
  observeReadRouting(listener: (routing: ReadRouting) => void): void {
    this.readRouted = listener;
  }

  /** Each replica's health and lag (DATABASE_READ_URLS order), for metrics; empty without replicas. */
  replicaStatus(): { healthy: boolean; lagMs: number }[] {
    return this.replicas?.status().map(({ healthy, lagMs }) => ({ healthy, lagMs })) ?? [];
  }

  /** Connections of each pool (for metrics): the main one, and the search one once it exists. */
  poolStats(): { pool: 'main' | 'search'; total: number; idle: number; waiting: number }[] {
    return this.current?.stats() ?? [];
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
    const onReplica = await this.onReplica(budget.readAfter, (pools) =>
      this.boundedQueryOn<T>(pools, sql, params, budget),
    );
    return onReplica ? onReplica.rows : this.run(true, (pools) => this.boundedQueryOn<T>(pools, sql, params, budget));
  }

  async replicaQuery<T = Row>(sql: string, params: readonly SqlValue[] = [], after?: ReadAfter): Promise<T[]> {
    const onReplica = await this.onReplica(after, (pools) =>
      new ClientExecutor(pools.main, !this.transactionPooling).query<T>(sql, params),
    );
    return onReplica ? onReplica.rows : this.query<T>(sql, params);
  }

  /**
   * Runs `read` on a replica that has replayed `after` (any healthy one without it), if there is one;
   * undefined when the primary must answer: no replica fits, or the chosen one went away (it then waits
   * for its next good poll).
   */
  private async onReplica<T>(
    after: ReadAfter | undefined,
    read: (pools: ServerPools) => Promise<T[]>,
  ): Promise<{ rows: T[] } | undefined> {
    if (!this.replicas) return undefined;
    const choice = this.replicas.choose(after ? await after() : undefined);
    if (!('url' in choice)) {
      this.readRouted?.(choice.primary === 'own-write' ? 'primary-own-write' : 'primary-no-replica');
      return undefined;
    }
    try {
      const rows = await read(this.replicaPools(choice.url));
      this.readRouted?.('replica');
      return { rows };
    } catch (error) {
      if (!isConnectionLost(error)) throw error;
      this.replicas.failed(choice.url);
      this.readRouted?.('primary-replica-failed');
      return undefined;
    }
  }

  private async boundedQueryOn<T>(
    pools: ServerPools,
    sql: string,
    params: readonly SqlValue[],
    budget: ReadBudget,
  ): Promise<T[]> {
    budgetLeft(budget);
    let client: pg.PoolClient;
    try {
      client = await pools.searches(budget.limitMs).connect();
    } catch (error) {
      // Waiting for a connection past the deadline is the budget's error, not the pool's.
      budgetLeft(budget);
      throw error;
    }
    let cancelled: 'deadline' | 'aborted' | undefined;
    let broken = false;
    // The server process to cancel: the connection's own, or behind a pooler the one serving this
    // transaction (the pooler hands out a key of its own), read when the transaction starts.
    let backend = (client as unknown as { processID: number }).processID;
    const cancel = (reason: 'deadline' | 'aborted') => {
      if (cancelled) return;
      cancelled = reason;
      void pools.main.query('SELECT pg_cancel_backend($1)', [backend]).catch(() => undefined);
    };
    const onAbort = () => cancel('aborted');
    let timer: NodeJS.Timeout | undefined;
    let inTransaction = false;
    try {
      if (pools.transactionPooling) {
        // One round trip: the transaction, its own statement_timeout and jit (SET LOCAL: the pooler's
        // server connections carry no settings of ours), and its server process.
        const started = (await client.query(
          `BEGIN READ ONLY; SELECT pg_backend_pid() AS pid, set_config('statement_timeout', '${Math.ceil(budgetLeft(budget))}', true), set_config('jit', 'off', true)`,
        )) as unknown as pg.QueryResult[];
        inTransaction = true;
        backend = (started[1].rows[0] as { pid: number }).pid;
      }
      timer = setTimeout(() => cancel('deadline'), budgetLeft(budget));
      budget.signal?.addEventListener('abort', onAbort, { once: true });
      const rows = await new ClientExecutor(client, !pools.transactionPooling).query<T>(sql, params);
      if (inTransaction) await client.query('COMMIT');
      return rows;
    } catch (error) {
      if (inTransaction) await client.query('ROLLBACK').catch(() => undefined);
      if ((error as { code?: string }).code === PG_QUERY_CANCELED) {
        throw new BudgetExceededError(budget.limitMs, cancelled ?? 'deadline');
      }
      broken = isConnectionLost(error);
      throw error;
    } finally {
      clearTimeout(timer);
      budget.signal?.removeEventListener('abort', onAbort);
      // A cancel may still be on its way to this backend: never hand the connection to another search.
      client.release(cancelled !== undefined || broken);
    }
  }

  /** A read (SELECT) is run again after a lost connection; anything else might have been done already. */
  query<T = Row>(sql: string, params?: readonly SqlValue[]): Promise<T[]> {
    const reads = /^\s*SELECT\b/i.test(
      sql.startsWith(postgresDialect.adhocStatement) ? sql.slice(postgresDialect.adhocStatement.length) : sql,
    );
    return this.run(reads, (pools) => new ClientExecutor(pools.main, !this.transactionPooling).query<T>(sql, params));
  }

  execute(sql: string, params?: readonly SqlValue[]): Promise<number> {
    return this.run(false, (pools) => new ClientExecutor(pools.main, !this.transactionPooling).execute(sql, params));
  }

  async transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    // Not getting a connection sent nothing: that much may be tried again on the server found next.
    const { pools, client } = await this.run(true, async (p) => ({ pools: p, client: await p.main.connect() }));
    let broken = false;
    try {
      await client.query('BEGIN');
      try {
        const result = await fn(new ClientExecutor(client, !this.transactionPooling));
        await client.query('COMMIT');
        return result;
      } catch (error) {
        await client.query('ROLLBACK').catch(() => undefined);
        if (error instanceof Error && 'code' in error) translateErrors(error);
        throw error;
      }
    } catch (error) {
      if (!isConnectionLost(error)) throw error;
      broken = true;
      this.lost(pools);
      throw new DatabaseUnavailableError(error);
    } finally {
      client.release(broken);
    }
  }

  executeScript(sql: string): Promise<void> {
    return this.run(false, async (pools) => {
      await pools.main.query(sql);
    });
  }

  ping(): Promise<void> {
    return this.run(true, async (pools) => {
      await pools.main.query('SELECT 1');
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    this.replicas?.stop();
    await Promise.all([...this.replicaPoolsByUrl.values()].map((p) => p.end().catch(() => undefined)));
    await this.locating?.catch(() => undefined);
    await this.current?.end();
  }
}
