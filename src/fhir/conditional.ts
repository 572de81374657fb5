// Conditional interactions find their target by a search (https://hl7.org/fhir/R4/http.html#cond-update).
import { createHash } from 'node:crypto';
import { AppError } from '../errors.js';
import { requireAccess } from './access.js';
import type { SqlExecutor } from '../storage/sql/database.js';
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

/**
 * The ids of the resources of `type` that match the criteria (at most `limit`), searched inside the
 * write transaction `tx`. Criteria are searched strictly: an unknown parameter is an error, never
 * silently ignored (that would match everything). They obey the caller's search scopes like any
 * search: `s` on `type` itself, and a 403 for a chain or `_has` through a type the caller may not
 * search, since whether a conditional write matches (200 or 201, deleted or not) tells about the data.
 */
export async function findMatches(
  request: FhirRequest,
  tx: SqlExecutor,
  type: string,
  criteria: [string, string][],
  limit = 2,
): Promise<string[]> {
  requireAccess(request, 'search', type);
  const canSearch = (t: string) => request.principal.canFhir('search', t);
  return request.services.search.findIds(tx, type, new URLSearchParams(criteria).toString(), canSearch, limit);
}

/**
 * Serialises conditional writes with the same criteria: two concurrent conditional creates of one
 * patient must not both create. PostgreSQL takes a transaction-scoped advisory lock on the criteria;
 * SQLite's write transactions are serialised already. Call inside the write transaction, before
 * searching: the search then sees whatever the previous holder committed.
 */
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
