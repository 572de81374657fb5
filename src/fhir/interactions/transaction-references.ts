// Transaction step 2 (https://hl7.org/fhir/R4/http.html#trules, "Resolving references in Bundles"):
// every reference to an entry's fullUrl becomes the id the transaction assigned, and every conditional
// reference (`Patient?identifier=...`) its one match, searched inside the transaction (none or several:
// 412). Nested and contained references alike.
import { AppError } from '../../errors.js';
import type { SqlExecutor } from '../../storage/sql/database.js';
import { requireAccess } from '../access.js';
import { findMatches, parseCriteria } from '../conditional.js';
import { forEachReference, parseConditionalReference } from '../references.js';
import type { FhirRequest } from '../services.js';
import { atEntry } from './bundle-input.js';
import type { PlannedEntry } from './transaction-identities.js';

export async function resolveReferences(
  request: FhirRequest,
  tx: SqlExecutor,
  planned: readonly PlannedEntry[],
  idsByFullUrl: ReadonlyMap<string, string>,
  label: (index: number) => string,
): Promise<void> {
  const conditionalTargets = new Map<string, string>();
  for (const entry of planned) {
    const pending: { reference: string; replace: (next: string) => void }[] = [];
    forEachReference(entry.resource, (reference, replace) => {
      const local = idsByFullUrl.get(reference);
      if (local) replace(local);
      else if (parseConditionalReference(reference)) pending.push({ reference, replace });
    });
    for (const { reference, replace } of pending) {
      try {
        let target = conditionalTargets.get(reference);
        if (!target) {
          target = await conditionalTarget(request, tx, reference);
          conditionalTargets.set(reference, target);
        }
        replace(target);
      } catch (error) {
        throw atEntry(error, label(entry.index));
      }
    }
  }
}

async function conditionalTarget(request: FhirRequest, tx: SqlExecutor, reference: string): Promise<string> {
  const { type, query } = parseConditionalReference(reference)!;
  requireAccess(request, 'search', type);
  const matches = await findMatches(request, tx, type, parseCriteria(type, query));
  if (matches.length !== 1) {
    throw new AppError(
      'precondition-failed',
      `The conditional reference ${reference} matches ${matches.length === 0 ? 'no' : 'more than one'} resource`,
    );
  }
  return `${type}/${matches[0]}`;
}
