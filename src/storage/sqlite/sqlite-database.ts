import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { performance } from 'node:perf_hooks';
import BetterSqlite3 from 'better-sqlite3';
import type { Database as SqliteConnection, Statement } from 'better-sqlite3';
import {
  budgetLeft,
  BudgetExceededError,
  SerializationError,
  StatementInterruptedError,
  UniqueViolationError,
} from '../sql/database.js';
import type { ReadBudget, Row, SqlDatabase, SqlExecutor, SqlValue } from '../sql/database.js';
import { sqliteDialect } from '../sql/dialect.js';
import { Mutex } from '../sql/mutex.js';
import { Checkpointer } from './checkpointer.js';
import { interruptExtensionPath, SqliteReadPool } from './read-pool.js';
import { preparedStatementBytes, statementCache } from './statement-cache.js';
import { fileFsync, WalSync } from './wal-sync.js';
import type { Fsync } from './wal-sync.js';
import { INLINE_LEASH_MS, INLINE_TICK_MS, SlowStatements } from './inline-searches.js';
import { WatchdogThread } from './statement-watchdog.js';
import type { StatementWatchdog } from './statement-watchdog.js';
import { sqliteFileName } from '../database-url.js';

function open(fileName: string): SqliteConnection {
  if (fileName !== ':memory:') mkdirSync(dirname(fileName), { recursive: true });
  const connection = new BetterSqlite3(fileName);
  connection.pragma('journal_mode = WAL');
  // NORMAL: COMMIT writes the WAL without an fsync. With AMBIENT_SQLITE_SYNCHRONOUS=full (the default)
  // the WAL is then fsynced off the event loop before a commit is acknowledged (wal-sync.ts), so an
  // acknowledged write survives a crash of the machine too; with =normal only checkpoints sync, and an
  // acknowledged write survives the process being killed, not a power loss.
  connection.pragma('synchronous = NORMAL');
  connection.pragma('busy_timeout = 10000');
  connection.pragma('foreign_keys = ON');
  return connection;
}

class ConnectionExecutor implements SqlExecutor {
  readonly dialect = sqliteDialect;
  private readonly statements = statementCache<Statement>();
  /**
   * The writer's safety net (runGroup sets it for the statements of a write transaction): each is stopped
   * by the watchdog past this many ms instead of holding the event loop. Undefined: not bounded.
   */
  statementLimitMs: number | undefined;
  /** A statement interrupted there took the transaction with it: nothing more runs until the group ends. */
  lost = false;
  /** Present where the watchdog can stop this connection's statements (SqlExecutor.queryUntil). */
  readonly queryUntil:
    (<T = Row>(sql: string, params: readonly SqlValue[], deadline: number) => Promise<T[]>) | undefined;

  constructor(
    readonly connection: SqliteConnection,
    private readonly watchdog?: StatementWatchdog,
  ) {
    if (watchdog) this.queryUntil = async (sql, params, deadline) => this.rows(sql, params, deadline);
  }

  private statement(sql: string): Statement {
    let statement = this.statements.get(sql);
    if (!statement) {
      statement = this.connection.prepare(sql);
      // An evicted statement is finalized when it is garbage collected.
      this.statements.set(sql, statement, preparedStatementBytes(sql));
    }
    return statement;
  }

  /** Runs `run` under the watchdog: until `deadline`, else the safety net's limit, if either. */
  private watched<T>(run: () => T, deadline?: number): T {
    if (this.lost) throw new StatementInterruptedError();
    const limit = this.statementLimitMs;
    if (!this.watchdog || (deadline === undefined && limit === undefined)) return translateErrors(run);
    const until = deadline ?? performance.now() + limit!;
    try {
      return translateErrors(() => this.watchdog!.run(until, run));
    } catch (error) {
      // SQLite rolls the whole transaction back when it interrupts a write statement; a statement
      // after that would run outside it, in autocommit.
      if (error instanceof StatementInterruptedError && limit !== undefined && !this.connection.inTransaction) {
        this.lost = true;
      }
      throw error;
    }
  }

  private rows<T>(sql: string, params: readonly SqlValue[], deadline?: number): T[] {
    return this.watched(() => {
      const statement = this.statement(sql);
      if (statement.reader) return statement.all(...params) as T[];
      statement.run(...params);
      return [];
    }, deadline);
  }

  async query<T = Row>(sql: string, params: readonly SqlValue[] = []): Promise<T[]> {
    return this.rows<T>(sql, params);
  }

  async execute(sql: string, params: readonly SqlValue[] = []): Promise<number> {
    return this.watched(() => this.statement(sql).run(...params).changes);
  }
}

function translateErrors<T>(fn: () => T): T {
  try {
    return fn();
  } catch (error) {
    const code = (error as { code?: string }).code ?? '';
    if (code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY') {
      throw new UniqueViolationError(error);
    }
    if (code.startsWith('SQLITE_BUSY')) throw new SerializationError(error);
    throw error;
  }
}

/** WAL pages (4 KiB) after which the writer's own commit finishes the worker's checkpoints (16 MiB). */
const WRITER_CHECKPOINT_PAGES = 4000;

/**
 * The same for a bulk load (`import`, 160 MiB): each of the writer's checkpoints also fsyncs the database
 * file, and at the default an import spent a tenth of its time in them (issue 13, docs/benchmarks.md).
 */
const BULK_LOAD_CHECKPOINT_PAGES = 40_000;

export interface SqliteOptions {
  /** full (the default): a commit is acknowledged once the WAL is fsynced; normal: once written. */
  readonly synchronous?: 'full' | 'normal';
  /** Replaces the WAL file's fsync (tests). */
  readonly fsync?: Fsync;
  /** Threads of the search pool (default 2; 0: searches on the event loop). */
  readonly readWorkers?: number;
  /** A process that loads data in large transactions (`import`): the writer checkpoints less often. */
  readonly bulkLoad?: boolean;
  /**
   * The safety net of write transactions (not of a bulk load): a statement of one still running after
   * this many ms is stopped by the watchdog and fails its transaction, instead of holding the event loop
   * (AMBIENT_REQUEST_TIMEOUT_MS: no client waits longer). Undefined: not bounded.
   */
  readonly writeStatementLimitMs?: number;
  /** The interrupt extension to load (default: the one `npm install` built); false: none (tests). */
  readonly extension?: string | false;
}

const READ_ONLY_STATEMENT = /^\s*(SELECT|WITH)\b/i;

/** The most transactions one group commit takes: bounds how long the first of them waits. */
const MAX_GROUP = 64;

interface PendingTransaction {
  fn: (tx: SqlExecutor) => Promise<unknown>;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/**
 * SQLite through better-sqlite3. A file database gets two connections: one writer, whose transactions
 * are queued by a mutex (SQLite has one writer anyway), and one reader, which in WAL mode never sees a
 * transaction that has not committed. An in-memory database cannot be shared between connections, so
 * there everything goes through the writer and its mutex.
 */
export class SqliteDatabase implements SqlDatabase {
  readonly dialect = sqliteDialect;
  private readonly writer: ConnectionExecutor;
  private readonly reader: ConnectionExecutor | undefined;
  private readonly writeLock = new Mutex();
  private readonly pending: PendingTransaction[] = [];
  private draining = false;
  /** Makes commits durable (synchronous=full on a file); undefined: commits are acknowledged as made. */
  private readonly walSync: WalSync | undefined;
  private readonly walFile: ReturnType<typeof fileFsync> | undefined;
  /** The WAL file SQLite writes (links resolved, absolute), which the fsync must reach. */
  readonly walPath: string | undefined;
  readonly localFolder: string | undefined;
  /** Checkpoints off the event loop (file databases). */
  readonly checkpointer: Checkpointer | undefined;
  /** Searches, on worker threads with their own read-only connections (file databases). */
  readonly readPool: SqliteReadPool | undefined;
  /** Stops the writer's statements at a deadline (statement-watchdog.ts); undefined without the extension. */
  readonly watchdog: StatementWatchdog | undefined;
  /** The one thread behind both watchdogs; undefined without the interrupt extension. */
  private readonly watchdogThread: WatchdogThread | undefined;
  private readonly slowStatements = new SlowStatements();
  private readonly writeStatementLimitMs: number | undefined;

  constructor(databaseUrl: string, options: SqliteOptions = {}) {
    const { synchronous = 'full', fsync, readWorkers = 2 } = options;
    const fileName = sqliteFileName(databaseUrl);
    this.localFolder = fileName === ':memory:' ? undefined : `${fileName}-files`;
    const extension = options.extension === false ? undefined : (options.extension ?? interruptExtensionPath());
    if (fileName !== ':memory:' && readWorkers > 0) {
      this.readPool = new SqliteReadPool(fileName, readWorkers, { extension: extension ?? false });
    }
    const writer = open(fileName);
    this.watchdogThread = extension ? new WatchdogThread(extension) : undefined;
    this.watchdog = this.watchdogThread?.watch(writer);
    this.writer = new ConnectionExecutor(writer, this.watchdog);
    this.writeStatementLimitMs = options.bulkLoad ? undefined : options.writeStatementLimitMs;
    if (fileName !== ':memory:') {
      const reader = open(fileName);
      // Watched (search statements run on it on a leash) only with a pool to fall back on: without one a
      // search runs on the event loop anyway.
      this.reader = new ConnectionExecutor(
        reader,
        this.readPool ? this.watchdogThread?.watch(reader, { tickMs: INLINE_TICK_MS }) : undefined,
      );
      // The worker cannot finish a checkpoint while writes keep arriving (each leaves new frames behind
      // it), and SQLite restarts the WAL only after a complete one: left alone the WAL grew to 6 GB
      // during a 1M-resource import. So the writer still checkpoints once the WAL passes
      // WRITER_CHECKPOINT_PAGES, which only has to copy the frames the worker has not copied yet.
      writer.pragma(`wal_autocheckpoint = ${options.bulkLoad ? BULK_LOAD_CHECKPOINT_PAGES : WRITER_CHECKPOINT_PAGES}`);
      this.checkpointer = new Checkpointer(fileName, (reason) => {
        writer.pragma('wal_autocheckpoint = 1000');
        process.emitWarning(`SQLite checkpoints on a worker thread failed (${reason}); back to automatic ones`);
      });
    }
    if (synchronous === 'full' && fileName !== ':memory:') {
      this.walPath = `${(this.writer.connection.pragma('database_list') as { file: string }[])[0].file}-wal`;
      this.walFile = fsync ? undefined : fileFsync(this.walPath);
      this.walSync = new WalSync(fsync ?? this.walFile!.fsync);
    }
  }

  /** After a failed fsync nothing more is written, nor reported ready (wal-sync.ts: fail-stop). */
  private refuseAfterFsyncFailure(): void {
    if (this.walSync?.failure !== undefined) throw this.walSync.failure;
  }

  /** Once what the writer has committed so far is on disk. */
  private durable(): Promise<void> {
    this.checkpointer?.committed();
    return this.walSync ? this.walSync.sync() : Promise.resolve();
  }

  async query<T = Row>(sql: string, params: readonly SqlValue[] = []): Promise<T[]> {
    if (this.reader && READ_ONLY_STATEMENT.test(sql)) return this.reader.query<T>(sql, params);
    this.refuseAfterFsyncFailure();
    const rows = await this.writeLock.run(() => this.writer.query<T>(sql, params));
    await this.durable();
    return rows;
  }

  /**
   * A search statement: first on the event loop on a leash, then on the read pool if it overran it
   * (inline-searches.ts). An in-memory database cannot be shared with other threads (and with
   * AMBIENT_SEARCH_WORKERS=0 there is no pool), so there it runs on the event loop and is only checked
   * against its budget before it starts.
   */
  async boundedQuery<T = Row>(sql: string, params: readonly SqlValue[], budget: ReadBudget): Promise<T[]> {
    if (!this.readPool) {
      budgetLeft(budget);
      return this.query<T>(sql, params);
    }
    if (this.reader?.queryUntil && !this.slowStatements.isSlow(sql)) {
      budgetLeft(budget);
      const leash = performance.now() + INLINE_LEASH_MS;
      try {
        const rows = await this.reader.queryUntil<T>(sql, params, Math.min(leash, budget.deadline));
        this.slowStatements.ranInline(sql);
        return rows;
      } catch (error) {
        if (!(error instanceof StatementInterruptedError)) throw error;
        if (budget.deadline <= leash) throw new BudgetExceededError(budget.limitMs, 'deadline');
        this.slowStatements.overran(sql);
      }
    }
    return this.readPool.query<T>(sql, params, budget);
  }

  /** One file, no replicas: the reader connection answers, as for any read. */
  replicaQuery<T = Row>(sql: string, params: readonly SqlValue[] = []): Promise<T[]> {
    return this.query<T>(sql, params);
  }

  /**
   * Starts the read workers ahead of the first search, unless statements run on the event loop first
   * (inline-searches.ts): then a worker starts when a statement first overruns its leash, and a server
   * whose searches stay short never holds the threads (each an isolate of its own, ~25 MB).
   */
  async warmUp(): Promise<void> {
    if (!this.reader?.queryUntil) await this.readPool?.start();
  }

  async execute(sql: string, params: readonly SqlValue[] = []): Promise<number> {
    this.refuseAfterFsyncFailure();
    const changes = await this.writeLock.run(() => this.writer.execute(sql, params));
    await this.durable();
    return changes;
  }

  /**
   * Group commit: transactions that arrive while the writer is busy wait in a queue and then run
   * together, each in its own savepoint (when there are several), under one BEGIN IMMEDIATE ... COMMIT, so that several writes
   * share one fsync. A transaction that fails rolls back to its savepoint and leaves the others alone;
   * each is answered only once the shared COMMIT is on disk. The fsync runs on the thread pool while
   * the next group already executes (wal-sync.ts).
   */
  async transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    this.refuseAfterFsyncFailure();
    return new Promise<T>((resolve, reject) => {
      this.pending.push({ fn, resolve, reject } as PendingTransaction);
      if (!this.draining) {
        this.draining = true;
        // One turn of the event loop first: requests already read from their sockets add their writes
        // to the group, and a group's commit writes each shared page once.
        setImmediate(() => void this.drain());
      }
    });
  }

  private async drain(): Promise<void> {
    this.draining = true;
    try {
      while (this.pending.length > 0) {
        const group = this.pending.splice(0, MAX_GROUP);
        await this.writeLock.run(() => this.runGroup(group));
      }
    } finally {
      this.draining = false;
    }
  }

  private async runGroup(group: PendingTransaction[]): Promise<void> {
    try {
      // Queued before an fsync failed: not run either.
      this.refuseAfterFsyncFailure();
    } catch (failure) {
      for (const item of group) item.reject(failure);
      return;
    }
    const connection = this.writer.connection;
    const outcomes: ({ ok: true; value: unknown } | { ok: false; error: unknown })[] = [];
    try {
      translateErrors(() => connection.exec('BEGIN IMMEDIATE'));
    } catch (error) {
      for (const item of group) item.reject(error);
      return;
    }
    this.writer.lost = false;
    this.writer.statementLimitMs = this.writeStatementLimitMs;
    // Only a group of several needs savepoints: inside one, SQLite copies each page the transaction
    // changes into a sub-journal (a temporary file past 64 KiB) so that ROLLBACK TO can restore it. A
    // lone transaction that fails rolls back as a whole instead (the catch below), with its own error.
    const savepoints = group.length > 1;
    try {
      for (const [index, item] of group.entries()) {
        if (savepoints) connection.exec('SAVEPOINT grouped');
        try {
          const value = await item.fn(this.writer);
          if (savepoints) connection.exec('RELEASE grouped');
          outcomes.push({ ok: true, value });
        } catch (error) {
          if (!savepoints) throw error;
          if (this.writer.lost) {
            // The safety net stopped a write statement and SQLite rolled back the whole group: this
            // transaction fails, the others run again in the next group.
            item.reject(error);
            this.pending.unshift(...group.slice(0, index), ...group.slice(index + 1));
            return;
          }
          connection.exec('ROLLBACK TO grouped');
          connection.exec('RELEASE grouped');
          outcomes.push({ ok: false, error });
        }
      }
      connection.exec('COMMIT');
    } catch (error) {
      if (connection.inTransaction) connection.exec('ROLLBACK');
      for (const item of group) item.reject(error);
      return;
    } finally {
      this.writer.statementLimitMs = undefined;
    }
    const answer = (syncError?: unknown) =>
      group.forEach((item, i) => {
        const outcome = outcomes[i];
        if (outcome.ok && syncError === undefined) item.resolve(outcome.value);
        else item.reject(outcome.ok ? syncError : outcome.error);
      });
    if (!outcomes.some((o) => o.ok)) return answer();
    // Not awaited: the writer goes on with the next group while this one's fsync runs.
    this.durable().then(
      () => answer(),
      (error: unknown) => answer(error ?? new Error('fsync failed')),
    );
  }

  async executeScript(sql: string): Promise<void> {
    await this.writeLock.run(async () => translateErrors(() => this.writer.connection.exec(sql)));
    await this.durable();
  }

  async ping(): Promise<void> {
    // Not ready after a failed fsync, so that the server is restarted and SQLite recovers the WAL.
    this.refuseAfterFsyncFailure();
    await (this.reader ?? this.writer).query('SELECT 1 AS ok');
  }

  async close(): Promise<void> {
    // Transactions queued before close() (a group starts one event-loop turn later) run first.
    while (this.draining || this.pending.length > 0) await new Promise((resolve) => setImmediate(resolve));
    await this.writeLock.run(async () => {
      try {
        await this.durable();
      } finally {
        await this.checkpointer?.close();
        await this.readPool?.close();
        await this.watchdogThread?.close();
        this.reader?.connection.close();
        this.writer.connection.close();
        await this.walFile?.close();
      }
    });
  }
}
