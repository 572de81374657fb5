// https://hl7.org/fhir/R4/http.html#transaction and https://hl7.org/fhir/R4/bundle.html#transaction
// POST /fhir with a batch (batch.ts) or transaction Bundle. A transaction is all or nothing, in one
// database transaction, in the steps of http.html#trules: ids (transaction-identities.ts), references
// (transaction-references.ts), then the writes in processing order, then the reads, which run inside
// the transaction too: they see its writes, and a failing read fails it, with nothing stored. Where a
// search inside the write transaction could not be stopped at its budget (SQLite), the searches run
// after the commit instead, and a Bundle without writes holds no write transaction at all
// (docs/storage.md, "Searches and conditional criteria of a write").
import { AppError } from '../../errors.js';
import { bundleJson } from '../bundle.js';
import type { BundleEntry } from '../bundle.js';
import type { EntryAction } from '../bundle-entry-request.js';
import { parseEntryRequest, processingRank } from '../bundle-entry-request.js';
import { entryCriteria, withMatchesAhead } from '../conditional.js';
import type { Criteria } from '../conditional.js';
import type { FhirResponse } from '../response.js';
import type { FhirRequest } from '../services.js';
import type { SqlExecutor } from '../../storage/sql/database.js';
import { batchInteraction } from './batch.js';
import { errorEntry, performEntry, responseEntry, ResponseBytes } from './bundle-entry.js';
import type { BundleOptions } from './bundle-entry.js';
import { atEntry, entryLabel, readEntries } from './bundle-input.js';
import type { InputEntry } from './bundle-input.js';
import { assignIdentities } from './transaction-identities.js';
import type { PlannedEntry } from './transaction-identities.js';
import { resolveReferences } from './transaction-references.js';
import { writeResponse } from './write-response.js';

export type { BundleOptions } from './bundle-entry.js';

/** processingRank of GET/HEAD entries: processed last (bundle.html#transaction). */
const READS = 3;

/** POST /fhir with a batch or transaction Bundle. */
export async function bundleInteraction(
  request: FhirRequest,
  body: unknown,
  options: BundleOptions,
): Promise<FhirResponse> {
  const { type, entries } = readEntries(request, body);
  return type === 'batch'
    ? batchInteraction(request, entries, options)
    : transactionInteraction(request, entries, options);
}

/** What one run of the transaction answers: the response entries in entry order, what was read. */
interface Answers {
  readonly entries: BundleEntry[];
  readonly accessed: string[];
}

async function transactionInteraction(
  request: FhirRequest,
  entries: readonly InputEntry[],
  options: BundleOptions,
): Promise<FhirResponse> {
  const parsed = parseEntries(request, entries);
  const label = (index: number) => entryLabel(index, entries[index]);
  const reads = parsed.filter((entry) => processingRank(entry.action) === READS);
  // The reads' answers are bounded together, inside the transaction and after it alike.
  const bytes = new ResponseBytes(request.services.config.maxPageBytes);
  if (reads.length === parsed.length) {
    // Nothing to write: no write transaction to hold, the reads run as any read (searches bounded, off
    // the writer), and a failing one fails the Bundle.
    const answers: Answers = { entries: new Array<BundleEntry>(parsed.length), accessed: [] };
    await performReads(request, undefined, reads, answers, options, label, bytes);
    return transactionResponse(answers);
  }
  // Where a search inside the write transaction could not be stopped at its budget (SQLite), the
  // searches run after the commit, as bounded reads; whatever could refuse them is checked first.
  const afterCommit = request.services.search.searchesAfterCommit ? reads.filter(({ action }) => isSearch(action)) : [];
  await checkSearches(request, afterCommit, label);
  const answers = await withMatchesAhead(request, criteriaOf(parsed, label), (request) =>
    request.services.store.transaction(async (store, tx): Promise<Answers> => {
      // Every run starts from the entries as posted: the store runs this again after a conflict, and a
      // run rewrites references in copies (resolveReferences), never in the posted resources.
      const planned: PlannedEntry[] = parsed.map((entry) => ({ ...entry }));
      const storeRequest: FhirRequest = { ...request, services: { ...request.services, store } };
      const idsByFullUrl = await assignIdentities(storeRequest, tx, planned, label, options.newId);
      const written = new Set<string>();
      const txRequest: FhirRequest = {
        ...storeRequest,
        bundleTargets: new Set(idsByFullUrl.values()),
        transactionWrites: written,
      };
      const rewritten = await resolveReferences(txRequest, tx, planned, idsByFullUrl, label);
      const answers: Answers = { entries: new Array<BundleEntry>(planned.length), accessed: [] };
      await store.readAhead(
        planned.flatMap(({ action }) => (action.kind === 'update' || action.kind === 'delete' ? [action] : [])),
      );
      // The rewritten resources are validated ahead, together, where the services can.
      const forget = rewritten.length > 0 ? await request.services.prevalidate?.(rewritten) : undefined;
      try {
        await performWrites(txRequest, planned, answers, options, label, written);
        const inside = reads.filter((entry) => !afterCommit.includes(entry));
        await performReads(txRequest, tx, inside, answers, options, label, bytes);
      } finally {
        forget?.();
      }
      return answers;
    }),
  );
  // Committed: a search that fails now (its time budget: nothing else is left to refuse it) cannot undo
  // the writes, so it answers its own entry with its OperationOutcome, as in a batch.
  await performReads(request, undefined, afterCommit, answers, options, label, bytes, true);
  return transactionResponse(answers);
}

function transactionResponse(answers: Answers): FhirResponse {
  return {
    status: 200,
    body: bundleJson({ type: 'transaction-response', entries: answers.entries }),
    accessed: answers.accessed,
  };
}

const isSearch = (action: EntryAction) => action.kind === 'search' || action.kind === 'compartment-search';

/** Parses and plans each search (scopes, parameters, cost limits) without running it: 400, 403 or 422 now. */
async function checkSearches(
  request: FhirRequest,
  searches: readonly PlannedEntry[],
  label: (index: number) => string,
): Promise<void> {
  for (const entry of searches) {
    try {
      await performEntry(request, entry, undefined, true);
    } catch (error) {
      throw atEntry(error, label(entry.index));
    }
  }
}

/**
 * The criteria the transaction will search (entryCriteria), searched ahead of it together
 * (withMatchesAhead) where the database needs that; an entry's error names the entry.
 */
function criteriaOf(planned: readonly PlannedEntry[], label: (index: number) => string): Criteria[] {
  return planned.flatMap(({ index, action, resource }) => {
    const at = (error: unknown) => atEntry(error, label(index));
    try {
      return entryCriteria(action, resource, at);
    } catch (error) {
      throw at(error);
    }
  });
}

/** Each entry's request, before anything runs: a malformed entry is the whole Bundle's 400. */
export function parseEntries(request: FhirRequest, entries: readonly InputEntry[]): PlannedEntry[] {
  return entries.map((input, index) => {
    try {
      if (!input || typeof input !== 'object') throw new AppError('bad-request', 'An entry must be an object');
      const action = parseEntryRequest(input.request, request.services.baseUrl, request.services.router);
      const fullUrl = typeof input.fullUrl === 'string' ? input.fullUrl : undefined;
      return { index, action, fullUrl, resource: input.resource as Record<string, unknown> | undefined };
    } catch (error) {
      throw atEntry(error, entryLabel(index, input));
    }
  });
}

/** DELETE, then POST, then PUT/PATCH (bundle.html#transaction), each group in entry order. */
async function performWrites(
  request: FhirRequest,
  planned: readonly PlannedEntry[],
  answers: Answers,
  options: BundleOptions,
  label: (index: number) => string,
  written: Set<string>,
): Promise<void> {
  const order = planned
    .filter((entry) => processingRank(entry.action) < READS)
    .sort((a, b) => processingRank(a.action) - processingRank(b.action) || a.index - b.index);
  for (const entry of order) {
    try {
      if (entry.existing) {
        answers.entries[entry.index] = await existingMatch(request, entry, options);
        continue;
      }
      const response = await performEntry(request, entry);
      if ('type' in entry.action) written.add(entry.action.type);
      answers.accessed.push(...(response.accessed ?? []));
      answers.entries[entry.index] = responseEntry(request, response, options);
    } catch (error) {
      throw atEntry(error, label(entry.index));
    }
  }
}

/**
 * A create whose ifNoneExist found its match: answered like a conditional create that finds one (200,
 * the resource only for a caller that may read it); nothing is written.
 */
async function existingMatch(request: FhirRequest, entry: PlannedEntry, options: BundleOptions): Promise<BundleEntry> {
  if (entry.action.kind !== 'create') throw new Error('Only a create finds an existing match');
  const { type } = entry.action;
  const existing = await request.services.store.read(type, entry.assignedId!);
  if (!existing || existing.deleted) throw new AppError('resource-deleted', `${type}/${entry.assignedId} was deleted`);
  return responseEntry(request, writeResponse(request, existing, 200), options);
}

/**
 * GET and HEAD, last, in entry order: inside the transaction (`tx`), reads through its store, searches on
 * its executor (search/transaction-runner.ts), and a failing read fails the transaction like any entry;
 * without one, as any read. `answerErrors`: after the commit, a failing read answers its own entry.
 */
async function performReads(
  request: FhirRequest,
  tx: SqlExecutor | undefined,
  reads: readonly PlannedEntry[],
  answers: Answers,
  options: BundleOptions,
  label: (index: number) => string,
  bytes: ResponseBytes,
  answerErrors = false,
): Promise<void> {
  for (const entry of reads) {
    try {
      bytes.assertRoom();
      const response = await performEntry(request, entry, tx);
      answers.accessed.push(...(response.accessed ?? []));
      answers.entries[entry.index] = responseEntry(request, response, options);
      bytes.add(answers.entries[entry.index]);
    } catch (error) {
      if (answerErrors && error instanceof AppError)
        answers.entries[entry.index] = errorEntry(atEntry(error, label(entry.index)) as AppError);
      else throw atEntry(error, label(entry.index));
    }
  }
}
