// The one interface both SQL backends implement. Statements are written once, with `?` placeholders;
// each backend turns them into its own form, so no query is written twice (the style notes: one query
// builder, dialect differences in one place: see dialect.ts).

import { performance } from 'node:perf_hooks';
import type { Dialect } from './dialect.js';

export type SqlValue = string | number | bigint | null | Buffer;
export type Row = Record<string, unknown>;

export interface SqlExecutor {
  readonly dialect: Dialect;
  /** Runs a statement and returns its rows (empty for statements without RETURNING). */
  query<T = Row>(sql: string, params?: readonly SqlValue[]): Promise<T[]>;
  /** Runs a statement and returns the number of rows it changed. */
  execute(sql: string, params?: readonly SqlValue[]): Promise<number>;
  /**
   * Runs a statement stopped at `deadline` (a `performance.now()` time), where this executor can stop its
   * own statements from another thread (SQLite's writer, with its watchdog); absent elsewhere. Stopped:
   * StatementInterruptedError (storage/sqlite/statement-watchdog.ts).
   */
  readonly queryUntil?: <T = Row>(sql: string, params: readonly SqlValue[], deadline: number) => Promise<T[]>;
}

/**
 * The time a bounded read (a search) may take: until `deadline` (a `performance.now()` time) or until
 * `signal` aborts (the client went away). `limitMs` is the configured budget, for messages.
 */
export interface ReadBudget {
  readonly deadline: number;
  readonly limitMs: number;
  readonly signal?: AbortSignal;
  /**
   * Whether it was aborted already, where that can be told without `signal` (which a request makes
   * only when asked for it: a search answered on the event loop never listens).
   */
  readonly aborted?: boolean;
  /**
   * Where the reader's own last write stands (write-positions.ts), asked only when a replica could
   * answer the read: a replica serves it only once it has replayed that far (read-your-writes).
   */
  readonly readAfter?: ReadAfter;
}

/** A bounded read stopped at its deadline, or because it was aborted; the statement no longer runs. */
export class BudgetExceededError extends Error {
  /** `held`: stopped at `limitMs`, the most a statement may hold the event loop (search/transaction-runner.ts). */
  constructor(
    readonly limitMs: number,
    readonly reason: 'deadline' | 'aborted' | 'held',
  ) {
    super(
      reason === 'aborted'
        ? 'stopped: the client went away'
        : reason === 'held'
          ? `stopped after ${limitMs} ms, the most it may hold the event loop`
          : `stopped after its time budget of ${limitMs} ms`,
    );
  }
}

/** A statement stopped at the deadline SqlExecutor.queryUntil gave it. */
export class StatementInterruptedError extends Error {
  constructor() {
    super('the statement was stopped at its deadline');
  }
}

/** The milliseconds `budget` has left; BudgetExceededError when it has none or was aborted. */
export function budgetLeft(budget: ReadBudget): number {
  if (budget.aborted ?? budget.signal?.aborted) throw new BudgetExceededError(budget.limitMs, 'aborted');
  const remaining = budget.deadline - performance.now();
  if (remaining <= 0) throw new BudgetExceededError(budget.limitMs, 'deadline');
  return remaining;
}

/** The write position a replica must have replayed before it may answer (storage/write-positions.ts). */
export type ReadAfter = () => Promise<string | undefined>;

export interface SqlDatabase extends SqlExecutor {
  /**
   * A folder for data kept beside the database as files (export output), on the one host where every
   * process using the database runs: SQLite's `<file>-files`. Undefined where processes on several hosts
   * may share the database (PostgreSQL) or there is no file (SQLite in memory): such data stays in tables.
   */
  readonly localFolder: string | undefined;
  /**
   * Runs a read-only statement (a search) within `budget`, away from the writer: on SQLite on a read
   * worker thread (the event loop stays free), on PostgreSQL with a statement timeout and a cancel at
   * the deadline or abort. Throws BudgetExceededError when stopped.
   */
  boundedQuery<T = Row>(sql: string, params: readonly SqlValue[], budget: ReadBudget): Promise<T[]>;
  /**
   * A read outside any transaction (a resource by id, a version, history) that a streaming replica may
   * answer: on PostgreSQL with DATABASE_READ_URLS one that has replayed `after()` (the reading account's
   * last write position) and lags less than allowed, else the primary; elsewhere the same as query().
   */
  replicaQuery<T = Row>(sql: string, params: readonly SqlValue[], after?: ReadAfter): Promise<T[]>;
  /** Starts what bounded reads need (the SQLite read workers) ahead of the first search. */
  warmUp(): Promise<void>;
  /**
   * Runs fn inside one transaction: committed when fn resolves, rolled back when it throws. Writes are
   * serialised on SQLite; on PostgreSQL, rows are locked with the dialect's `forUpdate`.
   */
  transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T>;
  /** Runs a script of several statements (migrations), without parameters. */
  executeScript(sql: string): Promise<void>;
  ping(): Promise<void>;
  close(): Promise<void>;
}

/**
 * The database could not be reached, or the connection was lost mid-request (a restart, a failover):
 * the transaction was rolled back (unless the connection died while its COMMIT was on the way, which
 * no client of any database can tell), and the request may be retried shortly (503 with Retry-After).
 */
export class DatabaseUnavailableError extends Error {
  constructor(cause?: unknown, message = 'the database is unavailable') {
    super(message, { cause });
  }
}

/** Thrown when a statement breaks a unique constraint, whatever the backend. */
export class UniqueViolationError extends Error {
  constructor(cause: unknown) {
    super('unique constraint violated', { cause });
  }
}

/** Thrown when the database cannot serialise a transaction (PostgreSQL 40001/40P01, SQLite BUSY). */
export class SerializationError extends Error {
  constructor(cause: unknown) {
    super('transaction could not be serialised', { cause });
  }
}
