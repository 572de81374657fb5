// https://hl7.org/fhir/R4/http.html#transaction and https://hl7.org/fhir/R4/bundle.html#transaction
// POST /fhir with a batch (batch.ts) or transaction Bundle. A transaction is all or nothing, in one
// database transaction, in the steps of http.html#trules: ids (transaction-identities.ts), references
// (transaction-references.ts), then the writes in processing order, then the reads, which run inside
// the transaction too: they see its writes, and a failing read fails it, with nothing stored.
import { AppError } from '../../errors.js';
import { bundleJson } from '../bundle.js';
import type { BundleEntry } from '../bundle.js';
import { parseEntryRequest, processingRank } from '../bundle-entry-request.js';
import type { FhirResponse } from '../response.js';
import type { FhirRequest } from '../services.js';
import type { SqlExecutor } from '../../storage/sql/database.js';
import { batchInteraction } from './batch.js';
import { performEntry, responseEntry, ResponseBytes } from './bundle-entry.js';
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
  const answers = await request.services.store.transaction(async (store, tx): Promise<Answers> => {
    // Every run starts from the entries as posted: the store runs this again after a conflict, and a
    // run rewrites references in copies (resolveReferences), never in the posted resources.
    const planned: PlannedEntry[] = parsed.map((entry) => ({ ...entry }));
    const storeRequest: FhirRequest = { ...request, services: { ...request.services, store } };
    const idsByFullUrl = await assignIdentities(storeRequest, tx, planned, label, options.newId);
    const txRequest: FhirRequest = { ...storeRequest, bundleTargets: new Set(idsByFullUrl.values()) };
    const rewritten = await resolveReferences(txRequest, tx, planned, idsByFullUrl, label);
    const answers: Answers = { entries: new Array<BundleEntry>(planned.length), accessed: [] };
    await store.readAhead(
      planned.flatMap(({ action }) => (action.kind === 'update' || action.kind === 'delete' ? [action] : [])),
    );
    // The rewritten resources are validated ahead, together, where the services can.
    const forget = rewritten.length > 0 ? await request.services.prevalidate?.(rewritten) : undefined;
    try {
      await performWrites(txRequest, planned, answers, options, label);
      await performReads(txRequest, tx, planned, answers, options, label);
    } finally {
      forget?.();
    }
    return answers;
  });
  return {
    status: 200,
    body: bundleJson({ type: 'transaction-response', entries: answers.entries }),
    accessed: answers.accessed,
  };
}

/** Each entry's request, before anything runs: a malformed entry is the whole Bundle's 400. */
export function parseEntries(request: FhirRequest, entries: readonly InputEntry[]): PlannedEntry[] {
  const isType = (name: string) => request.services.types.isResourceType(name);
  return entries.map((input, index) => {
    try {
      if (!input || typeof input !== 'object') throw new AppError('bad-request', 'An entry must be an object');
      const action = parseEntryRequest(input.request, request.services.baseUrl, isType);
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
 * GET and HEAD, last, in entry order, inside the transaction: reads through its store, searches on its
 * executor (search/transaction-runner.ts). A failing read fails the transaction like any entry.
 */
async function performReads(
  request: FhirRequest,
  tx: SqlExecutor,
  planned: readonly PlannedEntry[],
  answers: Answers,
  options: BundleOptions,
  label: (index: number) => string,
): Promise<void> {
  // The writes' answers hold what the request sent; the reads' are bounded together.
  const bytes = new ResponseBytes(request.services.config.maxPageBytes);
  for (const entry of planned) {
    if (processingRank(entry.action) < READS) continue;
    try {
      bytes.assertRoom();
      const response = await performEntry(request, entry, tx);
      answers.accessed.push(...(response.accessed ?? []));
      answers.entries[entry.index] = responseEntry(request, response, options);
      bytes.add(answers.entries[entry.index]);
    } catch (error) {
      throw atEntry(error, label(entry.index));
    }
  }
}
