// Searches inside a write transaction (https://hl7.org/fhir/R4/http.html#trules): their statements run
// on the transaction's own executor, so they see its writes and fail it when they fail. Not through
// SqlDatabase.boundedQuery: the read workers (SQLite) and the search pool (PostgreSQL) are other
// connections, which cannot see an uncommitted transaction. Each statement is still stopped at the
// budget (docs/storage.md, "Searches and conditional criteria of a write"):
// - PostgreSQL: a local statement_timeout of the time left. Setting it and setting it back are round
//   trips of their own (0.9 ms each measured on the loaded 2-core machine), so it is set once per search
//   and restored once after it, and for a search of one statement (conditional criteria) the restore
//   rides in the statement itself: the server arms a statement's timeout when the statement starts, so a
//   set_config inside it leaves its own bound in place and only unbounds the statements after it.
// - SQLite's writer: its watchdog (storage/sqlite/statement-watchdog.ts) interrupts the statement from
//   another thread. The statement holds the event loop while it runs, so it is stopped at
//   WRITER_HOLD_MS if the budget leaves more.
import { AppError } from '../errors.js';
import { budgetLeft, BudgetExceededError, StatementInterruptedError } from '../storage/sql/database.js';
import type { ReadBudget, Row, SqlDatabase, SqlExecutor } from '../storage/sql/database.js';
import { performance } from 'node:perf_hooks';
import type { StatementRunner } from './estimate.js';
import type { Sql } from './sql/fragment.js';

/**
 * The longest one search statement may run on SQLite's writer, which holds the event loop (/healthz and
 * every other request) while it does: long enough for a chain or `_has` over a few thousand resources,
 * short enough that a client retrying it in a loop still leaves the server answering between tries.
 */
export const WRITER_HOLD_MS = 300;

/**
 * How stale the PostgreSQL bound may get before it is set again: a statement started this long after it
 * was set may overrun the budget by as much. Most searches' statements all start within it, so one set.
 */
const RESET_AFTER_MS = 100;

/**
 * Runs `work` with a runner for one search's statements on `tx`, each bounded by `budget` as above, and
 * checked against it before it starts (deadline, client gone). A statement stopped at the bound is a
 * BudgetExceededError, like a bounded read; on PostgreSQL the transaction is then aborted, which is what
 * a failing entry does to a transaction anyway.
 */
export async function withTransactionRunner<T>(
  tx: SqlExecutor,
  budget: ReadBudget,
  work: (run: StatementRunner) => Promise<T>,
): Promise<T> {
  const timeout = tx.dialect.transactionStatementTimeout;
  if (timeout === undefined) return work((statement) => runOnWriter(tx, budget, statement));
  let previous: string | undefined;
  let setAt = 0;
  const run = async (statement: Sql) => {
    const remaining = Math.ceil(budgetLeft(budget));
    const now = performance.now();
    if (previous === undefined || now - setAt > RESET_AFTER_MS) {
      const [row] = await tx.query<{ previous: string }>(timeout.set, [String(remaining)]);
      previous ??= row.previous;
      setAt = now;
    }
    return stoppedAtBudget(tx, budget, () => tx.query(statement.text, statement.params));
  };
  const result = await work(run);
  if (previous !== undefined) await tx.query(timeout.set, [previous]);
  return result;
}

/** One statement bounded by `budget` on `tx` (conditional criteria): on PostgreSQL, two round trips. */
export async function runInTransaction(tx: SqlExecutor, budget: ReadBudget, statement: Sql): Promise<Row[]> {
  // Outside any transaction (the database itself: the importer looks conditional references up ahead),
  // the search is an ordinary bounded read, on the read pool or the search pool.
  if (isDatabase(tx)) return tx.boundedQuery(statement.text, statement.params, budget);
  const timeout = tx.dialect.transactionStatementTimeout;
  if (timeout === undefined) return runOnWriter(tx, budget, statement);
  const [{ previous }] = await tx.query<{ previous: string }>(timeout.set, [String(Math.ceil(budgetLeft(budget)))]);
  return stoppedAtBudget(tx, budget, () =>
    tx.query(timeout.restoringWithin(statement.text), [previous, ...statement.params]),
  );
}

/**
 * As runInTransaction where the statement can be bounded there; on SQLite without the interrupt
 * extension it runs unbounded, as every statement of its writer does (for statements that were always
 * run there, such as the cheap re-check of criteria on a few candidates, rather than refused).
 */
export async function runBoundedWhereCan(tx: SqlExecutor, budget: ReadBudget, statement: Sql): Promise<Row[]> {
  const bounded = isDatabase(tx) || tx.dialect.transactionStatementTimeout !== undefined || tx.queryUntil !== undefined;
  return bounded ? runInTransaction(tx, budget, statement) : tx.query(statement.text, statement.params);
}

async function stoppedAtBudget(tx: SqlExecutor, budget: ReadBudget, query: () => Promise<Row[]>): Promise<Row[]> {
  try {
    return await query();
  } catch (error) {
    if (tx.dialect.transactionStatementTimeout?.stopped(error))
      throw new BudgetExceededError(budget.limitMs, 'deadline');
    throw error;
  }
}

/** SQLite: on the writer, stopped by its watchdog; where there is none, not run at all. */
async function runOnWriter(tx: SqlExecutor, budget: ReadBudget, statement: Sql): Promise<Row[]> {
  const remaining = budgetLeft(budget);
  if (!tx.queryUntil) {
    throw new AppError(
      'search-not-bounded',
      'These criteria must be searched inside the write transaction, where this server cannot stop a search at its budget (the SQLite interrupt extension is not built, docs/storage.md); write the resources they depend on in an earlier request',
    );
  }
  const held = remaining > WRITER_HOLD_MS;
  try {
    return await tx.queryUntil(
      statement.text,
      statement.params,
      performance.now() + Math.min(remaining, WRITER_HOLD_MS),
    );
  } catch (error) {
    if (!(error instanceof StatementInterruptedError)) throw error;
    throw held ? new BudgetExceededError(WRITER_HOLD_MS, 'held') : new BudgetExceededError(budget.limitMs, 'deadline');
  }
}

function isDatabase(executor: SqlExecutor): executor is SqlDatabase {
  return typeof (executor as Partial<SqlDatabase>).boundedQuery === 'function';
}
