// Searches inside a transaction Bundle (https://hl7.org/fhir/R4/http.html#trules): their statements run
// on the transaction's own executor, so they see its writes and fail it when they fail. Not through
// SqlDatabase.boundedQuery: the read workers (SQLite) and the search pool (PostgreSQL) are other
// connections, which cannot see an uncommitted transaction. The budget holds as far as the backend
// lets a statement of an open transaction be stopped (docs/search.md, "Searches inside a transaction").
import { budgetLeft, BudgetExceededError } from '../storage/sql/database.js';
import type { ReadBudget, SqlExecutor } from '../storage/sql/database.js';
import type { StatementRunner } from './estimate.js';
import type { Sql } from './sql/fragment.js';

/**
 * A runner for one search's statements on `tx`: before each, the budget is checked (deadline, client
 * gone); where the dialect can bound a statement of an open transaction (PostgreSQL: a local
 * statement_timeout of the time left), each runs bounded, and the bound before it is set back after.
 * A statement stopped at the bound is a BudgetExceededError, like a bounded read; on PostgreSQL the
 * transaction is then aborted, which is what a failing entry does to a transaction anyway.
 */
export function transactionRunner(tx: SqlExecutor, budget: ReadBudget): StatementRunner {
  const timeout = tx.dialect.transactionStatementTimeout;
  return async (statement: Sql) => {
    const remaining = Math.ceil(budgetLeft(budget));
    if (timeout === undefined) return tx.query(statement.text, statement.params);
    const [{ previous }] = await tx.query<{ previous: string }>(timeout.set, [String(remaining)]);
    let rows: Record<string, unknown>[];
    try {
      rows = await tx.query(statement.text, statement.params);
    } catch (error) {
      if (timeout.stopped(error)) throw new BudgetExceededError(budget.limitMs, 'deadline');
      throw error;
    }
    await tx.query(timeout.set, [previous]);
    return rows;
  };
}
