// Transaction step 2 (https://hl7.org/fhir/R4/http.html#trules, "Resolving references in Bundles"):
// every reference to an entry's fullUrl becomes the id the transaction assigned, and every conditional
// reference (`Patient?identifier=...`) its one match, searched inside the transaction (none or several:
// 412). Nested and contained references alike. A relative reference (`Patient/0`) in an entry whose
// fullUrl is an absolute RESTful URL is first resolved against that fullUrl's base
// (https://hl7.org/fhir/R4/bundle.html#references): when an entry has the resulting fullUrl, the
// reference is to that entry.
import { AppError } from '../../errors.js';
import type { SqlExecutor } from '../../storage/sql/database.js';
import { requireAccess } from '../access.js';
import { findMatches, parseCriteria } from '../conditional.js';
import { copyWithReferences, forEachReference, parseConditionalReference } from '../references.js';
import type { FhirRequest } from '../services.js';
import { atEntry } from './bundle-input.js';
import type { PlannedEntry } from './transaction-identities.js';
import { RELATIVE_REFERENCE } from '../ids.js';

/** Rewrites the entries' references (each changed resource in a copy); answers the rewritten copies. */
export async function resolveReferences(
  request: FhirRequest,
  tx: SqlExecutor,
  planned: readonly PlannedEntry[],
  idsByFullUrl: ReadonlyMap<string, string>,
  label: (index: number) => string,
): Promise<Record<string, unknown>[]> {
  const conditionalTargets = new Map<string, string>();
  const rewritten: Record<string, unknown>[] = [];
  for (const entry of planned) {
    const { rewrites, conditional } = localRewrites(entry, idsByFullUrl);
    for (const reference of conditional) {
      try {
        let target = conditionalTargets.get(reference);
        if (!target) {
          target = await conditionalTarget(request, tx, reference);
          conditionalTargets.set(reference, target);
        }
        rewrites.set(reference, target);
      } catch (error) {
        throw atEntry(error, label(entry.index));
      }
    }
    if (rewrites.size === 0) continue;
    // Rewritten in a copy: the posted resource stays as posted, for a run again after a conflict.
    const copy = rewrittenCopy(entry.resource!, rewrites);
    entry.resource = copy;
    rewritten.push(copy);
  }
  return rewritten;
}

/**
 * What each reference of the entry's resource to another entry becomes (the same text always becomes
 * the same), and its conditional references, which only a search inside the transaction resolves.
 */
export function localRewrites(
  entry: PlannedEntry,
  idsByFullUrl: ReadonlyMap<string, string>,
): { rewrites: Map<string, string>; conditional: Set<string> } {
  const rewrites = new Map<string, string>();
  const conditional = new Set<string>();
  const base = restfulBase(entry.fullUrl);
  forEachReference(entry.resource, (reference) => {
    const local =
      idsByFullUrl.get(reference) ??
      (base !== undefined && RELATIVE.test(reference) ? idsByFullUrl.get(`${base}/${reference}`) : undefined);
    if (local) rewrites.set(reference, local);
    else if (parseConditionalReference(reference)) conditional.add(reference);
  });
  return { rewrites, conditional };
}

/** A copy of `resource` with its references replaced as `rewrites` says. */
export function rewrittenCopy(
  resource: Record<string, unknown>,
  rewrites: ReadonlyMap<string, string>,
): Record<string, unknown> {
  return copyWithReferences(resource, (reference) => rewrites.get(reference)) as Record<string, unknown>;
}

const RELATIVE = new RegExp(`^${RELATIVE_REFERENCE}$`);
const RESTFUL_FULL_URL = new RegExp(`^(https?://.+)/${RELATIVE_REFERENCE}$`);

/** The service base of an absolute RESTful fullUrl (`http://example.org/fhir/Patient/0` → `http://example.org/fhir`). */
function restfulBase(fullUrl: string | undefined): string | undefined {
  const match = fullUrl && RESTFUL_FULL_URL.exec(fullUrl);
  return match ? match[1] : undefined;
}

/** The one resource a conditional reference matches (`Type/id`); 412 for none or several. */
export async function conditionalTarget(request: FhirRequest, tx: SqlExecutor, reference: string): Promise<string> {
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
