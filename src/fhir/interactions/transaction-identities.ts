// Transaction step 1 (https://hl7.org/fhir/R4/http.html#trules): the id of every POST entry, a new one
// or the one match of its ifNoneExist (searched inside the transaction, its criteria locked till the
// end), and what each entry's fullUrl becomes.
import { randomUUID } from 'node:crypto';
import type { SqlExecutor } from '../../storage/sql/database.js';
import { requireAccess } from '../access.js';
import type { EntryAction } from '../bundle-entry-request.js';
import { parseCriteria, soleMatch } from '../conditional.js';
import type { FhirRequest } from '../services.js';
import { atEntry } from './bundle-input.js';

/** An entry of a transaction while it is processed. */
export interface PlannedEntry {
  readonly index: number;
  readonly action: EntryAction;
  readonly fullUrl?: string;
  /**
   * The resource to write: the posted one, or a copy of it with its references rewritten
   * (resolveReferences), so that the posted entries stay as posted for a run after a conflict.
   */
  resource?: Record<string, unknown>;
  /** Creates: the id the transaction assigns, or the existing match of a conditional create. */
  assignedId?: string;
  /** A conditional create that found its match: nothing is written. */
  existing?: boolean;
}

/**
 * Assigns the ids of the creates (`newId(index)`, or a random UUID) and answers `fullUrl` → `Type/id` for
 * creates, updates and patches. `label(index)` names an entry in errors.
 */
export async function assignIdentities(
  request: FhirRequest,
  tx: SqlExecutor,
  planned: readonly PlannedEntry[],
  label: (index: number) => string,
  newId: (entryIndex: number) => string = () => randomUUID(),
): Promise<Map<string, string>> {
  const idsByFullUrl = new Map<string, string>();
  for (const entry of planned) {
    try {
      const { action } = entry;
      if (action.kind === 'create') await assignId(request, tx, entry, action, newId(entry.index));
      const identity = fullUrlIdentity(entry);
      if (identity !== undefined) idsByFullUrl.set(entry.fullUrl!, identity);
    } catch (error) {
      throw atEntry(error, label(entry.index));
    }
  }
  return idsByFullUrl;
}

/** What the entry's fullUrl stands for once its id is known: `Type/id` of a create, update or patch. */
export function fullUrlIdentity(entry: PlannedEntry): string | undefined {
  const { action } = entry;
  if (entry.fullUrl === undefined) return undefined;
  if (action.kind === 'create')
    return entry.assignedId === undefined ? undefined : `${action.type}/${entry.assignedId}`;
  if (action.kind === 'update' || action.kind === 'patch') return `${action.type}/${action.id}`;
  return undefined;
}

async function assignId(
  request: FhirRequest,
  tx: SqlExecutor,
  entry: PlannedEntry,
  action: Extract<EntryAction, { kind: 'create' }>,
  id: string,
): Promise<void> {
  entry.assignedId = id;
  if (action.ifNoneExist === undefined) return;
  requireAccess(request, 'search', action.type);
  const criteria = parseCriteria(action.type, action.ifNoneExist);
  const match = await soleMatch(request, tx, action.type, criteria, 'ifNoneExist');
  if (match !== undefined) {
    entry.assignedId = match;
    entry.existing = true;
  }
}
