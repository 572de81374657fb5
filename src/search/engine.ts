// The search engine (https://hl7.org/fhir/R4/search.html): index maintenance on write (index-writer.ts)
// and the search interaction, as a pipeline: parse.ts (pure) → plan.ts (registry, access) →
// sql/compile.ts (SQL with bound parameters) → execute.ts (page, includes, Bundle). docs/search.md.
import type { Config } from '../config.js';
import type { R4Registry } from '../definitions/registry.js';
import { AppError } from '../errors.js';
import { mayReadBinary, requireAccess } from '../fhir/access.js';
import { StaleMatchesError } from '../fhir/services.js';
import type {
  CapabilitySearchParam,
  FhirRequest,
  MatchesAhead,
  SearchEngine,
  SearchOptions,
} from '../fhir/services.js';
import type { FhirResponse } from '../fhir/response.js';
import { performance } from 'node:perf_hooks';
import { BudgetExceededError } from '../storage/sql/database.js';
import type { ReadBudget, SqlDatabase, SqlExecutor } from '../storage/sql/database.js';
import type { IndexWriter } from '../storage/store.js';
import {
  compileMatches,
  compileMatchesAmong,
  compileMatchesAmongMany,
  compileMatchesAt,
  compileSearchStatements,
} from './sql/compile.js';
import type { Sql } from './sql/fragment.js';
import { SearchCatalog } from './catalog.js';
import { compartmentCriterion, compartmentSearchTypes } from './compartment.js';
import { decodeCursor } from './cursor.js';
import { CardinalityEstimator } from './estimate.js';
import { everythingSearchRequest, everythingTypes, parseEverything, planEverything } from './everything.js';
import type { StatementRunner } from './estimate.js';
import { executeSearch, queryKey } from './execute.js';
import { checkCost } from './cost-limits.js';
import { SearchIndexWriter } from './index-writer.js';
import { parseSearch } from './parse.js';
import type { SearchRequest } from './parse.js';
import { planSearch } from './plan.js';
import type { Plan, PlannedCriterion } from './plan.js';
import { TABLE_NAMES } from './tables.js';
import { runBoundedWhereCan, runInTransaction, withTransactionRunner } from './transaction-runner.js';
import { ReferenceParser } from '../fhir/references.js';

/** `_list` (plan.ts planList): no SearchParameter of R4 defines it, so the CapabilityStatement names it here. */
const LIST_PARAM: CapabilitySearchParam = {
  name: '_list',
  type: 'special',
  documentation: 'The resources a List names in entry.item: _list=<List id> (needs read or search on List)',
};

/** The tables searches read: their statistics choose the plans. */
const SEARCH_TABLES = ['resource', ...TABLE_NAMES];

export function createSearchCatalog(registry: R4Registry, baseUrl: string): SearchCatalog {
  return new SearchCatalog(registry, new ReferenceParser(baseUrl, (t) => registry.isResourceType(t)));
}

/**
 * Brings the database's statistics on the resource and index tables up to date: after a bulk load
 * (`import`), and now and then while the server writes (StatisticsKeeper). Without it PostgreSQL plans
 * searches right after a load as if the tables were still empty (measured: a `_has` search took 180 ms
 * instead of 12 ms, a token search 7.5 ms instead of 0.4 ms), and reads the table pages behind every
 * index row a search's range names until a VACUUM marks them all-visible (`vacuum`).
 */
export async function refreshSearchStatistics(db: SqlDatabase, vacuum: boolean): Promise<void> {
  for (const statement of db.dialect.refreshStatistics(SEARCH_TABLES, vacuum)) {
    await db.execute(statement);
  }
}

/**
 * A database that plans searches from table statistics (PostgreSQL), refreshed by autovacuum only about
 * once a minute, would believe right after a bulk load that the tables are still small (and, for
 * instance, sort every Patient instead of walking them in order). After 1,000 writes through this
 * process, at most every 10 s, the next search starts the dialect's refresh of the search tables in the
 * background (it blocks neither reads nor writes). Where the dialect has no statistics to refresh
 * (SQLite plans without them), nothing is ever started.
 *
 * The refresh is a VACUUM (ANALYZE) once writes have paused for a second: it makes the index ranges of
 * searches read the index alone (PostgreSQL's CPU per Encounter?patient search 12% lower), while
 * during a stream of creates it made each create cost 15-20% more (an insert into a page marked
 * all-visible clears the mark). So while writes go on it is an ANALYZE, and the first search after a
 * pause of a second vacuums what has been written since the last VACUUM.
 */
export class StatisticsKeeper {
  private writes = 0;
  private writesSinceVacuum = 0;
  private lastWrite = 0;
  private lastRun = 0;
  private running = false;
  private readonly needed: boolean;

  constructor(
    private readonly db: SqlDatabase,
    private readonly now: () => number = Date.now,
  ) {
    this.needed = db.dialect.refreshStatistics(SEARCH_TABLES, false).length > 0;
  }

  wrote(): void {
    this.writes++;
    this.writesSinceVacuum++;
    this.lastWrite = this.now();
  }

  beforeSearch(): void {
    if (!this.needed || this.running) return;
    const now = this.now();
    const paused = now - this.lastWrite >= WRITE_PAUSE_MS;
    const vacuum = paused && this.writesSinceVacuum >= REFRESH_AFTER_WRITES && now - this.lastRun >= WRITE_PAUSE_MS;
    const analyze = this.writes >= REFRESH_AFTER_WRITES && now - this.lastRun >= REFRESH_EVERY_MS;
    if (!vacuum && !analyze) return;
    this.running = true;
    this.lastRun = now;
    this.writes = 0;
    if (vacuum) this.writesSinceVacuum = 0;
    refreshSearchStatistics(this.db, vacuum)
      .catch(() => undefined)
      .finally(() => (this.running = false));
  }
}

const REFRESH_AFTER_WRITES = 1000;
const REFRESH_EVERY_MS = 10_000;
/** Writes have paused when none came for this long: then the refresh vacuums. */
const WRITE_PAUSE_MS = 1000;

export interface SearchEngineOptions {
  /** Replaces the estimates from the data (tests run every search shape with it). */
  readonly estimate?: (plan: Plan, run: StatementRunner) => Promise<Plan>;
}

/** Subscriptions' criteria matched in one statement (a UNION ALL of that many probes per candidate). */
const MATCHES_PER_STATEMENT = 50;

/** The budget of a request's searches: the one the HTTP layer made (a Bundle shares one), or a fresh one. */
export function searchBudget(request: FhirRequest, limitMs: number): ReadBudget {
  return request.budget ?? { deadline: performance.now() + limitMs, limitMs };
}

/** A search stopped at its budget is the client's 422 `too-costly` (docs/api.md), naming the budget. */
function tooCostly(error: unknown): never {
  if (error instanceof BudgetExceededError) {
    throw new AppError(
      'search-timeout',
      error.reason === 'deadline'
        ? `The search did not finish within its time budget of ${error.limitMs} ms (AMBIENT_SEARCH_TIMEOUT_MS) and was stopped; narrow it with more selective parameters`
        : error.reason === 'held'
          ? `The search runs inside the write transaction, where it may take ${error.limitMs} ms at most, and was stopped there; narrow it with more selective parameters, or write the resources it depends on in an earlier request`
          : 'The search was stopped: the client went away',
    );
  }
  throw error;
}

/** A search as planned, with what its links and cursors are bound to. */
interface PlannedSearch {
  readonly request: FhirRequest;
  readonly parsed: SearchRequest;
  readonly plan: Plan;
  /** Relative to the base: starts the Bundle's links and binds the cursors to this search. */
  readonly path: string;
}

/**
 * The search engine on one database: each search is parsed (parse.ts), planned (plan.ts, with the
 * caller's access and the cost limits), then run (runPlan: estimate, compile, execute). The catalog of
 * search parameters is also what indexing and reference parsing use.
 */
export class AmbientSearchEngine implements SearchEngine {
  readonly catalog: SearchCatalog;
  readonly indexWriter: IndexWriter;
  readonly searchesAfterCommit: boolean;
  private readonly statistics: StatisticsKeeper;
  private readonly estimate: (plan: Plan, run: StatementRunner) => Promise<Plan>;

  constructor(
    private readonly db: SqlDatabase,
    private readonly registry: R4Registry,
    private readonly config: Config,
    options: SearchEngineOptions = {},
  ) {
    this.catalog = createSearchCatalog(registry, `${config.publicUrl}/fhir`);
    this.statistics = new StatisticsKeeper(db);
    const estimator = new CardinalityEstimator(db.dialect);
    this.estimate = options.estimate ?? ((plan, run) => estimator.estimate(plan, run));
    const writer = new SearchIndexWriter(this.catalog);
    this.indexWriter = {
      write: (tx, pk, type, resource) => {
        this.statistics.wrote();
        return writer.write(tx, pk, type, resource);
      },
      newRows: (type, resource) => {
        this.statistics.wrote();
        return writer.newRows(type, resource);
      },
    };
    this.searchesAfterCommit = db.dialect.transactionStatementTimeout === undefined;
  }

  async search(
    request: FhirRequest,
    type: string | undefined,
    params: ReadonlyArray<readonly [string, string]>,
    options: SearchOptions,
  ): Promise<FhirResponse> {
    this.statistics.beforeSearch();
    const parsed = parseSearch(params);
    const types = this.searchedTypes(request, type, parsed);
    const plan = this.planFor(parsed, types, options.strict, request);
    if (options.planOnly) return { status: 200 };
    return this.runPlan({ request, parsed, plan, path: type ?? '' }, options.executor);
  }

  /** https://hl7.org/fhir/R4/search.html#2.21.1.2: a search inside `compartment/id`'s compartment. */
  async compartmentSearch(
    request: FhirRequest,
    compartment: string,
    id: string,
    type: string,
    params: ReadonlyArray<readonly [string, string]>,
    options: SearchOptions,
  ): Promise<FhirResponse> {
    this.statistics.beforeSearch();
    const rule = this.registry.compartment(compartment);
    if (!rule) throw new Error(`${compartment} is not a compartment`);
    const parsed = parseSearch(params);
    const canSearch = (t: string) => request.principal.canFhir('search', t);
    const types = compartmentSearchTypes(rule, type, parsed.types, canSearch);
    const plan = this.planFor(parsed, types, options.strict, request);
    if (options.planOnly) return { status: 200 };
    const inCompartment = compartmentCriterion(rule, id, types);
    return this.runPlan(
      {
        request,
        parsed,
        plan: { ...plan, criteria: [inCompartment, ...plan.criteria] },
        path: `${compartment}/${id}/${type}`,
      },
      options.executor,
    );
  }

  /** https://hl7.org/fhir/R4/patient-operation-everything.html, planned by everything.ts. */
  async everything(
    request: FhirRequest,
    id: string,
    params: ReadonlyArray<readonly [string, string]>,
  ): Promise<FhirResponse> {
    this.statistics.beforeSearch();
    const rule = this.registry.compartment('Patient');
    if (!rule) throw new Error('the Patient CompartmentDefinition is missing from generated/r4.json');
    const operation = parseEverything(params);
    const canRead = (t: string) => request.principal.canFhir('read', t);
    const types = everythingTypes(this.registry, rule, operation.types, canRead);
    const plan = planEverything(rule, id, types, operation, {
      catalog: this.catalog,
      plan: { references: this.catalog.references, now: Date.now(), dialect: this.db.dialect },
      canRead,
    });
    const parsed = everythingSearchRequest(operation);
    return this.runPlan({ request, parsed, plan, path: `Patient/${id}/$everything` }, undefined);
  }

  async findIdsAhead(
    request: FhirRequest,
    type: string,
    query: string,
    limit: number,
  ): Promise<MatchesAhead | undefined> {
    const plan = this.planCriteria(request, type, query);
    // Where a statement of a write transaction can be bounded (PostgreSQL), findIds searches there.
    if (this.db.dialect.transactionStatementTimeout) return undefined;
    const statement = compileMatchesAt(plan, this.db.dialect, limit);
    const budget = searchBudget(request, this.config.searchTimeoutMs);
    try {
      const rows = await this.db.boundedQuery<{ pk: number | null; seq: number | null }>(
        statement.text,
        statement.params,
        budget,
      );
      const seq = Number(rows.find((row) => row.pk === null)?.seq ?? 0);
      return { pks: rows.filter((row) => row.pk !== null).map((row) => Number(row.pk)), limit, seq };
    } catch (error) {
      tooCostly(error);
    }
  }

  async findIds(
    request: FhirRequest,
    executor: SqlExecutor,
    type: string,
    query: string,
    options: { readonly limit: number; readonly ahead?: MatchesAhead },
  ): Promise<string[]> {
    const plan = this.planCriteria(request, type, query);
    const { limit, ahead } = options;
    const budget = searchBudget(request, this.config.searchTimeoutMs);
    const inTransaction = async () => {
      const rows = await runInTransaction(executor, budget, compileMatches(plan, executor.dialect, 'id', limit));
      return rows.map((r) => r.id as string);
    };
    try {
      if (ahead) return await findIdsSince(executor, plan, ahead, budget, request.transactionWrites, inTransaction);
      return await inTransaction();
    } catch (error) {
      tooCostly(error);
    }
  }

  checkCriteria(request: FhirRequest, type: string, query: string): void {
    this.planCriteria(request, type, query);
  }

  /** One subscriber's criteria alone, within its own budget (matchesAmongMany finds a too costly one with it). */
  private async matchesAmong(
    request: FhirRequest,
    type: string,
    query: string,
    pks: readonly number[],
    executor?: SqlExecutor,
  ): Promise<number[]> {
    if (pks.length === 0) return [];
    const plan = this.planCriteria(request, type, query);
    const statement = compileMatchesAmong(plan, this.db.dialect, pks, pks.length);
    const budget = searchBudget(request, this.config.searchTimeoutMs);
    try {
      const rows = executor
        ? await runBoundedWhereCan(executor, budget, statement)
        : await this.db.boundedQuery<{ pk: number | string }>(statement.text, statement.params, budget);
      return rows.map((row) => Number(row.pk));
    } catch (error) {
      tooCostly(error);
    }
  }

  async matchesAmongMany(
    items: readonly { readonly request: FhirRequest; readonly query: string }[],
    type: string,
    pks: readonly number[],
    executor?: SqlExecutor,
  ): Promise<(number[] | AppError)[]> {
    const results: (number[] | AppError)[] = items.map(() => []);
    const planned: { index: number; plan: Plan }[] = [];
    items.forEach((item, index) => {
      try {
        planned.push({ index, plan: this.planCriteria(item.request, type, item.query) });
      } catch (error) {
        if (!(error instanceof AppError)) throw error;
        results[index] = error;
      }
    });
    if (pks.length === 0) return results;
    for (let start = 0; start < planned.length; start += MATCHES_PER_STATEMENT) {
      const chunk = planned.slice(start, start + MATCHES_PER_STATEMENT);
      const statement = compileMatchesAmongMany(
        chunk.map((p) => p.plan),
        this.db.dialect,
        pks,
      );
      const budget = searchBudget(items[chunk[0].index].request, this.config.searchTimeoutMs);
      let rows: { m: number | string; pk: number | string }[];
      try {
        rows = executor
          ? ((await runBoundedWhereCan(executor, budget, statement)) as typeof rows)
          : await this.db.boundedQuery<{ m: number | string; pk: number | string }>(
              statement.text,
              statement.params,
              budget,
            );
      } catch (error) {
        if (!(error instanceof BudgetExceededError)) throw error;
        // Which of them is too costly: each alone, within its own budget.
        for (const { index } of chunk) {
          const item = items[index];
          try {
            results[index] = await this.matchesAmong(item.request, type, item.query, pks, executor);
          } catch (alone) {
            if (!(alone instanceof AppError)) throw alone;
            results[index] = alone;
          }
        }
        continue;
      }
      for (const row of rows) (results[chunk[Number(row.m)].index] as number[]).push(Number(row.pk));
    }
    return results;
  }

  capabilitySearchParams(type: string): CapabilitySearchParam[] {
    return [...this.catalog.capabilities(type), LIST_PARAM];
  }

  capabilityIncludes(type: string): { include: string[]; revinclude: string[] } {
    return { include: this.catalog.includes(type), revinclude: this.catalog.revIncludes(type) };
  }

  capabilitySystemSearchParams(): CapabilitySearchParam[] {
    return [
      ...this.catalog.systemCapabilities(),
      {
        name: '_type',
        type: 'token',
        documentation: 'The resource types a system search returns, comma-separated',
      },
      {
        name: '_has',
        type: 'special',
        documentation: 'Reverse chaining: _has:Type:reference:parameter=value',
      },
      LIST_PARAM,
    ];
  }

  /** The types a type or system search covers, each one the caller may search (403 otherwise). */
  private searchedTypes(request: FhirRequest, type: string | undefined, parsed: SearchRequest): string[] {
    if (type !== undefined) {
      requireAccess(request, 'search', type);
      if (parsed.types)
        throw new AppError('invalid-search', '_type applies to a system search (GET /fhir?_type=...) only', {
          expression: '_type',
        });
      return [type];
    }
    if (parsed.types) {
      for (const t of parsed.types) {
        if (!this.registry.isResourceType(t)) {
          throw new AppError('invalid-search', `_type: ${t} is not a resource type`, { expression: '_type' });
        }
        requireAccess(request, 'search', t);
      }
      return [...new Set(parsed.types)];
    }
    // No _type: every type the caller may search.
    const types = this.registry.resourceTypes.filter((t) => request.principal.canFhir('search', t));
    if (types.length === 0)
      throw new AppError('forbidden', "The token's scopes do not allow search on any resource type");
    return types;
  }

  /** Conditional criteria as a plan: searched strictly, within the caller's search scopes. */
  private planCriteria(request: FhirRequest, type: string, query: string): Plan {
    if (!this.registry.isResourceType(type)) throw new AppError('invalid-search', `${type} is not a resource type`);
    const parsed = parseSearch([...new URLSearchParams(query)]);
    return this.planFor(parsed, [type], true, request);
  }

  /**
   * Stage 2 for a search and for conditional criteria alike, within the caller's scopes; beyond the cost
   * limits it is refused (422).
   */
  private planFor(parsed: SearchRequest, types: readonly string[], strict: boolean, request: FhirRequest): Plan {
    const plan = planSearch(parsed, types, {
      catalog: this.catalog,
      references: this.catalog.references,
      now: Date.now(),
      strict,
      canSearch: (t) => request.principal.canFhir('search', t),
      canRead: (t) => request.principal.canFhir('read', t),
      dialect: this.db.dialect,
    });
    checkCost(parsed, plan);
    return plan;
  }

  /**
   * Stages 3 and 4 of every search (plain, compartment, `$everything`), each statement within the
   * request's budget: inside a transaction Bundle on its executor (it sees the transaction's writes),
   * otherwise on a bounded read, away from the writer.
   */
  private async runPlan(search: PlannedSearch, executor: SqlExecutor | undefined): Promise<FhirResponse> {
    const budget = searchBudget(search.request, this.config.searchTimeoutMs);
    try {
      if (executor) {
        return await withTransactionRunner(executor, budget, (run) => this.runStatements(search, run, executor));
      }
      const run = (statement: Sql) => this.db.boundedQuery(statement.text, statement.params, budget);
      return await this.runStatements(search, run, this.db);
    } catch (error) {
      tooCostly(error);
    }
  }

  /**
   * Stages 3 and 4 on `run`: the cursor decoded, the plan estimated and compiled, the page executed.
   * The cursors' key is read through `keyFrom`, the executor the search runs on.
   */
  private async runStatements(
    search: PlannedSearch,
    run: StatementRunner,
    keyFrom: SqlExecutor,
  ): Promise<FhirResponse> {
    const { request, parsed, plan, path } = search;
    const secret = await request.services.cursorKey.read(keyFrom);
    const cursor = parsed.cursor ? decodeCursor(secret, parsed.cursor, queryKey(plan, path)) : undefined;
    const estimated = await this.estimate(plan, run);
    const { dialect } = this.db;
    const { maxPageBytes } = this.config;
    const compiled = compileSearchStatements(estimated, dialect, {
      count: parsed.count,
      total: parsed.total,
      summaryCount: parsed.summary === 'count',
      position: cursor?.position,
      backwards: cursor?.backwards,
      maxPageBytes,
    });
    const baseUrl = request.services.baseUrl;
    const mayRead = (content: string) => mayReadBinary(request, content);
    return executeSearch(
      { run, dialect, registry: this.registry, baseUrl, secret, path, maxPageBytes, mayReadBinary: mayRead },
      parsed,
      estimated,
      compiled,
      cursor,
    );
  }
}

/**
 * Resources written since conditional criteria were searched ahead that the write transaction checks
 * itself; past it they are searched ahead again (a bulk load ran meanwhile).
 */
const MAX_WRITTEN_SINCE = 1000;

/** The types other than the searched one whose resources decide a match: those chains and `_has` pass through. */
function joinedTypes(criteria: readonly PlannedCriterion[], into = new Set<string>()): Set<string> {
  for (const c of criteria) {
    if (c.kind === 'chain') c.targetTypes.forEach((t) => into.add(t));
    if (c.kind === 'has') into.add(c.sourceType);
    if (c.kind === 'chain' || c.kind === 'has' || c.kind === 'forTypes' || c.kind === 'exceptResource')
      joinedTypes([c.inner], into);
  }
  return into;
}

/**
 * The matches now, inside the write transaction, from those found ahead: the resources written since
 * (history after `ahead.seq`, this transaction's own writes included) are the only ones whose answer
 * may have changed, so the criteria are checked on them and on the earlier matches only, a few probes
 * each. Exact unless a resource a chain or `_has` passes through changed (the criteria of an unchanged
 * resource then changed too), too many were written to check cheaply, or the earlier matches were cut
 * at the limit and one of them no longer matches: then StaleMatchesError, and they are searched ahead again.
 * Where the resources a chain or `_has` passes through are of a type this transaction wrote itself
 * (`ownWrites`), searching ahead again would never see them: the criteria are searched `inTransaction`.
 */
async function findIdsSince(
  executor: SqlExecutor,
  plan: Plan,
  ahead: MatchesAhead,
  budget: ReadBudget,
  ownWrites: ReadonlySet<string> | undefined,
  inTransaction: () => Promise<string[]>,
): Promise<string[]> {
  const written = await executor.query<{ pk: number; type: string }>(
    'SELECT DISTINCT pk, type FROM resource_history WHERE seq > ? LIMIT ?',
    [ahead.seq, MAX_WRITTEN_SINCE + 1],
  );
  const joined = joinedTypes(plan.criteria);
  const writtenJoined = written.filter((row) => joined.has(row.type));
  if (writtenJoined.some((row) => ownWrites?.has(row.type))) return inTransaction();
  if (written.length > MAX_WRITTEN_SINCE || writtenJoined.length > 0) throw new StaleMatchesError();
  const candidates = new Set(ahead.pks);
  for (const row of written) if (plan.types.includes(row.type)) candidates.add(Number(row.pk));
  if (candidates.size === 0) return [];
  const statement = compileMatchesAmong(plan, executor.dialect, [...candidates], ahead.limit);
  // The candidates can be large resources (many index rows each): bounded like criteria searched in the
  // transaction.
  const rows = await runBoundedWhereCan(executor, budget, statement);
  if (ahead.pks.length >= ahead.limit && rows.length < ahead.limit) throw new StaleMatchesError();
  return rows.map((row) => row.id as string);
}
