// https://hl7.org/fhir/R4/http.html#transaction and https://hl7.org/fhir/R4/bundle.html#transaction
import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import { AppError, operationOutcomeFor } from '../../errors.js';
import { bundleJson } from '../bundle.js';
import { parseJsonBytes } from '../json-limits.js';
import type { BundleEntry } from '../bundle.js';
import { parseEntryRequest, processingRank } from '../bundle-entry-request.js';
import type { EntryAction } from '../bundle-entry-request.js';
import { requireAccess } from '../access.js';
import { findMatches, lockCriteria, parseCriteria } from '../conditional.js';
import { forEachReference, parseConditionalReference } from '../references.js';
import type { FhirResponse } from '../response.js';
import type { FhirRequest } from '../services.js';
import { conditionalDeleteInteraction } from './conditional-delete.js';
import { conditionalUpdateInteraction } from './conditional-update.js';
import { createInteraction } from './create.js';
import { deleteInteraction } from './delete.js';
import { historyInteraction } from './history.js';
import { patchInteraction } from './patch.js';
import { readInteraction } from './read.js';
import { updateInteraction } from './update.js';
import { vreadInteraction } from './vread.js';
import { writeResponse } from './write-response.js';

/** processingRank of GET/HEAD entries. */
const READS = 3;

interface InputEntry {
  fullUrl?: unknown;
  resource?: unknown;
  request?: Parameters<typeof parseEntryRequest>[0];
}

interface PlannedEntry {
  readonly index: number;
  readonly action: EntryAction;
  readonly fullUrl?: string;
  resource?: Record<string, unknown>;
  /** Creates: the id the transaction assigns, or the existing match of a conditional create. */
  assignedId?: string;
  existing?: boolean;
}

export interface BundleOptions {
  /** Prefer: return=minimal leaves the resources out of the response entries. */
  readonly returnResources: boolean;
}

function entryLabel(entry: { index: number; action?: EntryAction }, input: InputEntry | null | undefined): string {
  // The entry is client JSON: it may be null or not an object at all (`"entry": [null]`).
  const request = (input && typeof input === 'object' ? input.request : undefined) as
    { method?: unknown; url?: unknown } | undefined;
  return `Bundle.entry[${entry.index}] (${String(request?.method ?? '?')} ${String(request?.url ?? '?')})`;
}

/** The same error, with a first issue saying which entry caused it. */
function atEntry(error: unknown, where: string): unknown {
  if (!(error instanceof AppError)) return error;
  const diagnostics = `${where}: ${error.message}`;
  const lead = {
    severity: 'error' as const,
    code: error.entry.issueType,
    diagnostics,
    expression: [where.split(' ')[0]],
  };
  return new AppError(error.code, diagnostics, { ...error.options, issues: [lead, ...(error.options.issues ?? [])] });
}

function queryPairs(query: string): Record<string, string> {
  return Object.fromEntries(new URLSearchParams(query));
}

async function perform(request: FhirRequest, entry: PlannedEntry): Promise<FhirResponse> {
  const { action, resource } = entry;
  switch (action.kind) {
    case 'create':
      // A transaction resolved ifNoneExist while planning (and assigned the id); a batch entry has not.
      return createInteraction(request, action.type, resource, {
        id: entry.assignedId,
        ifNoneExist: entry.assignedId === undefined ? action.ifNoneExist : undefined,
      });
    case 'update':
      return updateInteraction(request, action.type, action.id, resource, action.ifMatch);
    case 'conditional-update':
      return conditionalUpdateInteraction(request, action.type, action.query, resource, action.ifMatch);
    case 'patch': {
      // In a Bundle, a JSON Patch travels as a Binary (bundle.html#patch); FHIRPath Patch as Parameters.
      const binary = resource as { resourceType?: unknown; data?: unknown } | undefined;
      if (binary?.resourceType === 'Binary') {
        // Decoded with the limits of a request body: the Bundle's own depth check never saw inside `data`.
        const data = typeof binary.data === 'string' ? binary.data : '';
        const patch = parseJsonBytes(Buffer.from(data, 'base64'), 'The JSON Patch in the Binary');
        return patchInteraction(request, action.type, action.id, 'json-patch', patch, action.ifMatch);
      }
      return patchInteraction(request, action.type, action.id, 'fhirpath-patch', resource, action.ifMatch);
    }
    case 'delete':
      return deleteInteraction(request, action.type, action.id);
    case 'conditional-delete':
      return conditionalDeleteInteraction(request, action.type, action.query);
    case 'read':
      return readInteraction(request, action.type, action.id, { ifNoneMatch: action.ifNoneMatch });
    case 'vread':
      return vreadInteraction(request, action.type, action.id, action.versionId);
    case 'search':
      return request.services.search.search(request, action.type, [...new URLSearchParams(action.query)], {
        strict: false,
      });
    case 'history':
      return historyInteraction(request, queryPairs(action.query), action.type, action.id);
  }
}

function responseEntry(request: FhirRequest, response: FhirResponse, options: BundleOptions): BundleEntry {
  const status = `${response.status} ${STATUS_CODES[response.status] ?? ''}`.trim();
  const body =
    response.body === undefined
      ? undefined
      : typeof response.body === 'string'
        ? response.body
        : JSON.stringify(response.body);
  return {
    // The written resource's URL is its version's Location without the version.
    fullUrl: response.location?.replace(/\/_history\/[^/]+$/, ''),
    resourceText: options.returnResources || !response.isWrite ? body : undefined,
    response: {
      status,
      ...(response.location ? { location: response.location.replace(`${request.services.baseUrl}/`, '') } : {}),
      ...(response.versionId !== undefined ? { etag: `W/"${response.versionId}"` } : {}),
      ...(response.lastModified !== undefined ? { lastModified: new Date(response.lastModified).toISOString() } : {}),
    },
  };
}

function errorEntry(error: AppError): BundleEntry {
  return {
    response: {
      status: `${error.status} ${STATUS_CODES[error.status] ?? ''}`.trim(),
      outcome: operationOutcomeFor(error),
    },
  };
}

function readEntries(request: FhirRequest, body: unknown): { type: 'batch' | 'transaction'; entries: InputEntry[] } {
  const bundle = body as { resourceType?: unknown; type?: unknown; entry?: unknown } | undefined;
  if (!bundle || typeof bundle !== 'object' || bundle.resourceType !== 'Bundle') {
    throw new AppError('bad-request', 'POST /fhir takes a Bundle of type batch or transaction');
  }
  if (bundle.type !== 'batch' && bundle.type !== 'transaction') {
    throw new AppError(
      'bad-request',
      `Bundle.type must be batch or transaction, got ${JSON.stringify(bundle.type ?? null)}`,
    );
  }
  const entries = bundle.entry === undefined ? [] : bundle.entry;
  if (!Array.isArray(entries)) throw new AppError('bad-request', 'Bundle.entry must be an array');
  const max = request.services.config.maxBundleEntries;
  if (entries.length > max) {
    throw new AppError(
      'bundle-too-large',
      `The Bundle has ${entries.length} entries; this server takes at most ${max} (AMBIENT_MAX_BUNDLE_ENTRIES)`,
    );
  }
  return { type: bundle.type, entries: entries as InputEntry[] };
}

/** POST /fhir with a batch or transaction Bundle. */
export async function bundleInteraction(
  request: FhirRequest,
  body: unknown,
  options: BundleOptions,
): Promise<FhirResponse> {
  const { type, entries } = readEntries(request, body);
  const accessed: string[] = [];
  const { baseUrl } = request.services;
  const isType = (name: string) => request.services.types.isResourceType(name);
  if (type === 'batch') {
    const responses: BundleEntry[] = [];
    for (const input of entries) {
      try {
        const action = parseEntryRequest(input?.request, baseUrl, isType);
        const response = await perform(request, {
          index: responses.length,
          action,
          resource: input.resource as Record<string, unknown>,
        });
        accessed.push(...(response.accessed ?? []));
        responses.push(responseEntry(request, response, options));
      } catch (error) {
        if (!(error instanceof AppError)) throw error;
        responses.push(errorEntry(error));
      }
    }
    return { status: 200, body: bundleJson({ type: 'batch-response', entries: responses }), accessed };
  }

  const planned: PlannedEntry[] = entries.map((input, index) => {
    try {
      if (!input || typeof input !== 'object') throw new AppError('bad-request', 'An entry must be an object');
      const action = parseEntryRequest(input.request, baseUrl, isType);
      const fullUrl = typeof input.fullUrl === 'string' ? input.fullUrl : undefined;
      // Each entry's resource is copied: references are rewritten below, never in the client's body.
      const resource =
        input.resource === undefined ? undefined : (structuredClone(input.resource) as Record<string, unknown>);
      return { index, action, fullUrl, resource };
    } catch (error) {
      throw atEntry(error, entryLabel({ index }, input));
    }
  });

  const responses = await request.services.store.transaction(async (store, tx) => {
    const txRequest: FhirRequest = { ...request, services: { ...request.services, store } };
    const idsByFullUrl = new Map<string, string>();
    for (const entry of planned) {
      try {
        const { action } = entry;
        if (action.kind === 'create') {
          entry.assignedId = randomUUID();
          if (action.ifNoneExist !== undefined) {
            requireAccess(txRequest, 'search', action.type);
            const criteria = parseCriteria(action.type, action.ifNoneExist);
            await lockCriteria(tx, action.type, criteria);
            const matches = await findMatches(txRequest, tx, action.type, criteria);
            if (matches.length > 1)
              throw new AppError(
                'precondition-failed',
                `ifNoneExist matches ${matches.length} or more ${action.type} resources`,
              );
            if (matches.length === 1) {
              entry.assignedId = matches[0];
              entry.existing = true;
            }
          }
          if (entry.fullUrl) idsByFullUrl.set(entry.fullUrl, `${action.type}/${entry.assignedId}`);
        } else if ((action.kind === 'update' || action.kind === 'patch') && entry.fullUrl) {
          idsByFullUrl.set(entry.fullUrl, `${action.type}/${action.id}`);
        }
      } catch (error) {
        throw atEntry(error, entryLabel(entry, entries[entry.index]));
      }
    }
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
            const { type: targetType, query } = parseConditionalReference(reference)!;
            requireAccess(txRequest, 'search', targetType);
            const matches = await findMatches(txRequest, tx, targetType, parseCriteria(targetType, query));
            if (matches.length !== 1) {
              throw new AppError(
                'precondition-failed',
                `The conditional reference ${reference} matches ${matches.length === 0 ? 'no' : 'more than one'} resource`,
              );
            }
            target = `${targetType}/${matches[0]}`;
            conditionalTargets.set(reference, target);
          }
          replace(target);
        } catch (error) {
          throw atEntry(error, entryLabel(entry, entries[entry.index]));
        }
      }
    }
    const results = new Array<BundleEntry>(planned.length);
    const order = [...planned]
      .filter((entry) => processingRank(entry.action) < READS)
      .sort((a, b) => processingRank(a.action) - processingRank(b.action) || a.index - b.index);
    for (const entry of order) {
      try {
        if (entry.existing) {
          // ifNoneExist found its match: answered like a conditional create that finds one (200, the
          // resource only for a caller that may read it), nothing is written.
          const { type: existingType } = entry.action;
          const existing = await store.read(existingType, entry.assignedId!);
          if (!existing || existing.deleted)
            throw new AppError('resource-deleted', `${existingType}/${entry.assignedId} was deleted`);
          results[entry.index] = responseEntry(txRequest, writeResponse(txRequest, existing, 200), options);
          continue;
        }
        const response = await perform(txRequest, entry);
        accessed.push(...(response.accessed ?? []));
        results[entry.index] = responseEntry(txRequest, response, options);
      } catch (error) {
        throw atEntry(error, entryLabel(entry, entries[entry.index]));
      }
    }
    return results;
  });
  // Reads come last (bundle.html#transaction) and run once the writes have committed, on their own
  // connections: a search never waits for a pool connection while this transaction holds one.
  for (const entry of planned) {
    if (processingRank(entry.action) < READS) continue;
    try {
      const response = await perform(request, entry);
      accessed.push(...(response.accessed ?? []));
      responses[entry.index] = responseEntry(request, response, options);
    } catch (error) {
      if (!(error instanceof AppError)) throw error;
      responses[entry.index] = errorEntry(error);
    }
  }
  return { status: 200, body: bundleJson({ type: 'transaction-response', entries: responses }), accessed };
}
