// The one interface both SQL backends implement. Statements are written once, with `?` placeholders;
// each backend turns them into its own form, so no query is written twice (STYLE.md: one query
// builder, dialect differences in one place: see dialect.ts).

import type { Dialect } from './dialect.js';

export type SqlValue = string | number | bigint | null | Buffer;
export type Row = Record<string, unknown>;

export interface SqlExecutor {
  readonly dialect: Dialect;
  /** Runs a statement and returns its rows (empty for statements without RETURNING). */
  query<T = Row>(sql: string, params?: readonly SqlValue[]): Promise<T[]>;
  /** Runs a statement and returns the number of rows it changed. */
  execute(sql: string, params?: readonly SqlValue[]): Promise<number>;
}

export interface SqlDatabase extends SqlExecutor {
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
