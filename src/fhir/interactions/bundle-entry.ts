// One entry of a batch or transaction Bundle: the interaction its request names, and the response
// entry its outcome becomes (https://hl7.org/fhir/R4/bundle.html#transaction-response).
import { STATUS_CODES } from 'node:http';
import { AppError, operationOutcomeFor } from '../../errors.js';
import type { SqlExecutor } from '../../storage/sql/database.js';
import type { BundleEntry } from '../bundle.js';
import { entryHeader } from '../bundle-entry-request.js';
import type { EntryAction } from '../bundle-entry-request.js';
import { parseJsonBytes } from '../json-limits.js';
import type { FhirResponse } from '../response.js';
import type { InteractionCall } from '../routing.js';
import type { FhirRequest } from '../services.js';
import type { PatchFormat } from './patch.js';

export interface BundleOptions {
  /** Prefer: return=minimal leaves the resources out of the response entries. */
  readonly returnResources: boolean;
  /**
   * A transaction's id for the create at an entry (by index), where the caller chose the ids ahead (the
   * importer, which validates the entries as they will be written before the transaction starts);
   * otherwise each create gets a random UUID.
   */
  readonly newId?: (entryIndex: number) => string;
}

/** An entry ready to run: its parsed request, and its resource as it will be written. */
export interface EntryToPerform {
  readonly action: EntryAction;
  readonly resource?: Record<string, unknown>;
  /** Creates in a transaction: the id assigned while planning (its ifNoneExist already resolved). */
  readonly assignedId?: string;
}

/**
 * Runs the entry's interaction: its route's handler (router.ts), as for the same request over HTTP.
 * `transaction`: the open transaction of a transaction Bundle, in which a search entry runs (the store
 * of `request` is already bound to it).
 */
export async function performEntry(
  request: FhirRequest,
  entry: EntryToPerform,
  transaction?: SqlExecutor,
  /** A search entry: only checked (SearchOptions.planOnly). */
  planOnly = false,
): Promise<FhirResponse> {
  const { action, resource } = entry;
  const call: InteractionCall = {
    params: action.params,
    query: action.query,
    header: (name) => entryHeader(action.request, name),
    searchParams: () => [...new URLSearchParams(action.query)],
    resource: () => resource,
    patch: () => entryPatch(resource),
    body: resource,
    inBundle: { executor: transaction, planOnly, assignedId: entry.assignedId },
  };
  return action.route.handler!(request, call);
}

/** In a Bundle, a JSON Patch travels as a Binary (bundle.html#patch); FHIRPath Patch as Parameters. */
function entryPatch(resource: Record<string, unknown> | undefined): { format: PatchFormat; document: unknown } {
  const binary = resource as { resourceType?: unknown; data?: unknown } | undefined;
  if (binary?.resourceType !== 'Binary') return { format: 'fhirpath-patch', document: resource };
  // Decoded with the limits of a request body: the Bundle's own depth check never saw inside `data`.
  const data = typeof binary.data === 'string' ? binary.data : '';
  return {
    format: 'json-patch',
    document: parseJsonBytes(Buffer.from(data, 'base64'), 'The JSON Patch in the Binary'),
  };
}

/** The response entry of a successful entry: status, location, etag, lastModified, the resource. */
export function responseEntry(request: FhirRequest, response: FhirResponse, options: BundleOptions): BundleEntry {
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

/**
 * The bytes of resources a batch's response (a transaction's reads') holds so far. Each search in it is
 * bounded by AMBIENT_MAX_PAGE_BYTES, and so is the whole: once the response holds more, no further entry
 * runs (a batch answers each with 422, a transaction fails), so a Bundle of many large reads or searches
 * cannot build a response of gigabytes (at most about twice the limit: the last entry let in may bring
 * a page of its own).
 */
export class ResponseBytes {
  private bytes = 0;

  constructor(private readonly max: number) {}

  /** Before an entry runs: 422 once the response is full. */
  assertRoom(): void {
    if (this.bytes > this.max) {
      throw new AppError(
        'response-too-large',
        `The response already holds more than ${this.max} bytes of resources (AMBIENT_MAX_PAGE_BYTES); this entry was not performed: send it in another request`,
      );
    }
  }

  add(entry: BundleEntry): void {
    if (entry.resourceText) this.bytes += Buffer.byteLength(entry.resourceText);
  }
}

/** The response entry of a failed batch entry: its status and OperationOutcome. */
export function errorEntry(error: AppError): BundleEntry {
  return {
    response: {
      status: `${error.status} ${STATUS_CODES[error.status] ?? ''}`.trim(),
      outcome: operationOutcomeFor(error),
    },
  };
}
