// Between planning and compiling: how many rows each criterion that could drive the query matches,
// counted from the index (up to ESTIMATE_CAP + 1), so that compile.ts drives from the criterion that
// really is selective. The kind of a criterion says little: `code=8302-2` (body height) matches 2,197
// of the 31,773 Observations of the Synthea load and 73,140 of 732,441 in the 1M benchmark, a rare
// code a handful. Driving a `_has` from the body heights read 2,197 Observations to find 10 Patients
// (15 ms); walking the Patients and probing each stops after the page (0.07 ms).
//
// Counts are cached for a minute: they choose plans, never results, so a stale count costs at most a
// slower plan. A chain or `_has` is estimated by its inner criterion (what driving it reads first).
import { createHash } from 'node:crypto';
import { BudgetExceededError } from '../storage/sql/database.js';
import type { Plan, PlannedCriterion } from './plan.js';
import { compileEstimate, driverCandidate, ESTIMATE_CAP } from './sql/compile.js';
import type { Sql } from './sql/fragment.js';
import type { Dialect } from '../storage/sql/dialect.js';

/** Runs one statement within the search's budget (see SqlDatabase.boundedQuery). */
export type StatementRunner = (statement: Sql) => Promise<Record<string, unknown>[]>;

const TTL_MS = 60_000;
const MAX_CACHED = 10_000;

export class CardinalityEstimator {
  private readonly cache = new Map<string, { rows: number; at: number }>();

  constructor(
    private readonly dialect: Dialect,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * The plan with `estimatedRows` set on every criterion that could drive it, at any depth; the counts
   * run through `run`, within the search's budget.
   */
  async estimate(plan: Plan, run: StatementRunner): Promise<Plan> {
    if (!needsEstimates(plan.criteria)) return plan;
    try {
      return { ...plan, criteria: await Promise.all(plan.criteria.map((c) => this.annotate(c, run))) };
    } catch (error) {
      // Out of time: the search is over. Otherwise an estimate only chooses the plan: if counting
      // fails (a lock), search without one.
      if (error instanceof BudgetExceededError) throw error;
      return plan;
    }
  }

  private async annotate(c: PlannedCriterion, run: StatementRunner): Promise<PlannedCriterion> {
    if (c.kind === 'chain' || c.kind === 'has') {
      const inner = await this.annotate(c.inner, run);
      return { ...c, inner, estimatedRows: inner.estimatedRows };
    }
    if (c.kind === 'id') return { ...c, estimatedRows: c.ids.length };
    if (!driverCandidate(c)) return c;
    return { ...c, estimatedRows: await this.count(c, run) };
  }

  private async count(c: PlannedCriterion, run: StatementRunner): Promise<number> {
    const statement = compileEstimate(this.dialect, c, ESTIMATE_CAP);
    // A digest, not the text: a criterion with 1,000 values is ~100 KB of text and parameters, and
    // MAX_CACHED of those held 1 GB. A digest's entry is ~150 bytes whatever the criterion.
    const key = createHash('sha256')
      .update(statement.text)
      .update('\u0000')
      .update(JSON.stringify(statement.params))
      .digest('base64url');
    const now = this.now();
    const cached = this.cache.get(key);
    if (cached && now - cached.at < TTL_MS) return cached.rows;
    const [row] = await run(statement);
    const rows = Number(row?.n ?? 0);
    this.cache.delete(key);
    this.cache.set(key, { rows, at: now });
    // Map order is insertion order: the first key is the oldest.
    if (this.cache.size > MAX_CACHED) this.cache.delete(this.cache.keys().next().value as string);
    return rows;
  }
}

/**
 * Is there a choice for the data to make? Not when `_id` picks the rows, nor when the only candidate is
 * a reference (`Encounter?patient=<id>`, a compartment): it drives whatever it matches, and counting would cost a query
 * per distinct value. Codes are always counted: a code can be rare or in every other resource.
 */
function needsEstimates(criteria: readonly PlannedCriterion[]): boolean {
  // `_id` drives, and the other criteria are probes, which never choose a driver inside.
  if (criteria.some((c) => c.kind === 'id')) return false;
  const candidates = criteria.filter(driverCandidate);
  if (candidates.length !== 1) return candidates.length > 1;
  const [only] = candidates;
  return !((only.kind === 'rows' && only.table === 'idx_reference') || only.kind === 'compartment');
}
