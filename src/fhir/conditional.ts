// Conditional interactions find their target by a search (https://hl7.org/fhir/R4/http.html#cond-update).
import { createHash } from 'node:crypto';
import { AppError } from '../errors.js';
import { requireAccess } from './access.js';
import type { EntryAction } from './bundle-entry-request.js';
import { forEachReference, parseConditionalReference } from './references.js';
import type { SqlExecutor } from '../storage/sql/database.js';
import { StaleMatchesError } from './services.js';
import type { FhirRequest } from './services.js';

/** Parameters that shape a result page rather than select resources: not criteria. */
const RESULT_PARAMETERS = new Set([
  '_count',
  '_sort',
  '_include',
  '_revinclude',
  '_summary',
  '_elements',
  '_total',
  '_format',
  '_pretty',
]);

/** `identifier=a|b&name=x` → decoded pairs, refusing empty criteria (which would match everything). */
export function parseCriteria(type: string, query: string): [string, string][] {
  const pairs = [...new URLSearchParams(query)].filter(([name]) => !RESULT_PARAMETERS.has(name));
  if (pairs.length === 0) {
    throw new AppError(
      'bad-request',
      `A conditional ${type} request needs search criteria, e.g. ${type}?identifier=...`,
    );
  }
  return pairs;
}

/** A conditional write's criteria: its type and the decoded pairs (parseCriteria). */
export type Criteria = readonly [type: string, criteria: [string, string][], at?: (error: unknown) => unknown];

/**
 * The criteria a Bundle entry will search: its ifNoneExist, its conditional update or delete, and its
 * conditional references (`Patient?identifier=...`). `at` names the entry in errors of their search.
 */
export function entryCriteria(action: EntryAction, resource: unknown, at?: (error: unknown) => unknown): Criteria[] {
  const wanted: Criteria[] = [];
  if (action.kind === 'create' && action.ifNoneExist !== undefined) {
    wanted.push([action.type, parseCriteria(action.type, action.ifNoneExist), at]);
  }
  if (
    action.kind === 'conditional-update' ||
    action.kind === 'conditional-patch' ||
    action.kind === 'conditional-delete'
  ) {
    wanted.push([action.type, parseCriteria(action.type, action.query), at]);
  }
  forEachReference(resource, (reference) => {
    const conditional = parseConditionalReference(reference);
    if (conditional) wanted.push([conditional.type, parseCriteria(conditional.type, conditional.query), at]);
  });
  return wanted;
}

/** How criteria are known on the request (FhirRequest.matchesAhead). */
function criteriaKey(type: string, criteria: [string, string][]): string {
  return `${type}?${new URLSearchParams(criteria).toString()}`;
}

/** Times criteria are searched ahead again when the data changed under them, before a 409. */
const AHEAD_ATTEMPTS = 3;

/**
 * Runs `write` (which opens the write transaction) with the criteria it will search searched ahead
 * first, where the database needs that (SearchEngine.findIdsAhead: SQLite, whose writer cannot be
 * stopped mid-statement, so a costly search there would hold the event loop and every write). Inside,
 * findMatches checks them against what was written since. When that cannot be checked cheaply
 * (StaleMatchesError), the transaction is rolled back and they are searched ahead again, up to
 * AHEAD_ATTEMPTS times, then 409. Criteria already on the request (an entry of a transaction Bundle,
 * searched ahead with the whole Bundle's) are not searched again.
 */
export async function withMatchesAhead<T>(
  request: FhirRequest,
  wanted: readonly Criteria[],
  write: (request: FhirRequest) => Promise<T>,
): Promise<T> {
  const missing = wanted.filter(([type, criteria]) => !request.matchesAhead?.has(criteriaKey(type, criteria)));
  if (missing.length === 0) return write(request);
  for (let attempt = 1; ; attempt++) {
    const ahead = new Map(request.matchesAhead);
    for (const [type, criteria, at] of missing) {
      const key = criteriaKey(type, criteria);
      if (ahead.has(key)) continue;
      try {
        requireAccess(request, 'search', type);
        const query = new URLSearchParams(criteria).toString();
        ahead.set(key, await request.services.search.findIdsAhead(request, type, query, 2));
      } catch (error) {
        throw at ? at(error) : error;
      }
    }
    try {
      return await write({ ...request, matchesAhead: ahead });
    } catch (error) {
      if (!(error instanceof StaleMatchesError)) throw error;
      if (attempt >= AHEAD_ATTEMPTS) {
        throw new AppError(
          'conditional-contended',
          `The resources the conditional criteria depend on kept changing while they were searched (${AHEAD_ATTEMPTS} times); retry the request`,
        );
      }
    }
  }
}

/**
 * The ids of the resources of `type` that match the criteria (at most `limit`), inside the write
 * transaction `tx`, from their search ahead when withMatchesAhead made one. Criteria are searched
 * strictly: an unknown parameter is an error, never silently ignored (that would match everything).
 * They obey the caller's search scopes like any search: `s` on `type` itself, and a 403 for a chain or
 * `_has` through a type the caller may not search, since whether a conditional write matches (200 or
 * 201, deleted or not) tells about the data.
 */
export async function findMatches(
  request: FhirRequest,
  tx: SqlExecutor,
  type: string,
  criteria: [string, string][],
  limit = 2,
): Promise<string[]> {
  requireAccess(request, 'search', type);
  const ahead = request.matchesAhead?.get(criteriaKey(type, criteria));
  return request.services.search.findIds(request, tx, type, new URLSearchParams(criteria).toString(), {
    limit,
    ahead: ahead?.limit === limit ? ahead : undefined,
  });
}

/**
 * Serialises conditional writes with the same criteria: two concurrent conditional creates of one
 * patient must not both create. PostgreSQL takes a transaction-scoped advisory lock on the criteria;
 * SQLite's write transactions are serialised already. Call inside the write transaction, before
 * searching: the search then sees whatever the previous holder committed.
 */
/**
 * Inside the write's transaction: the criteria locked (a concurrent write with the same criteria waits
 * for this one), then their one match, or undefined when none; several are 412. `what` names the
 * criteria in that answer (`If-None-Exist`, `The criteria`).
 */
export async function soleMatch(
  request: FhirRequest,
  tx: SqlExecutor,
  type: string,
  criteria: [string, string][],
  what: string,
): Promise<string | undefined> {
  await lockCriteria(tx, type, criteria);
  const matches = await findMatches(request, tx, type, criteria);
  if (matches.length > 1) {
    throw new AppError('precondition-failed', `${what} match ${matches.length} or more ${type} resources`);
  }
  return matches[0];
}

export async function lockCriteria(tx: SqlExecutor, type: string, criteria: [string, string][]): Promise<void> {
  const statement = tx.dialect.transactionLock;
  if (!statement) return;
  const key = `${type}?${[...criteria]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([n, v]) => `${n}=${v}`)
    .join('&')}`;
  // A digest, not the criteria themselves: the key is only compared, and raw client text (a NUL byte,
  // say) has no business reaching the database unparsed.
  await tx.query(statement, [createHash('sha256').update(key).digest('hex')]);
}
