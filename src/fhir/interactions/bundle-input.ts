// Reading a posted batch or transaction Bundle (https://hl7.org/fhir/R4/http.html#transaction): its
// shape, its size, and how an error names the entry it came from.
import { AppError } from '../../errors.js';
import type { parseEntryRequest } from '../bundle-entry-request.js';
import type { FhirRequest } from '../services.js';

/** One entry as the client sent it: client JSON, checked only as far as it is used. */
export interface InputEntry {
  fullUrl?: unknown;
  resource?: unknown;
  request?: Parameters<typeof parseEntryRequest>[0];
}

/** The Bundle's type and entries, or 400 (not a batch or transaction Bundle) / 413 (too many entries). */
export function readEntries(
  request: FhirRequest,
  body: unknown,
): { type: 'batch' | 'transaction'; entries: InputEntry[] } {
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

/** `Bundle.entry[3] (POST Observation)`: how an error names its entry. */
export function entryLabel(index: number, input: InputEntry | null | undefined): string {
  // The entry is client JSON: it may be null or not an object at all (`"entry": [null]`).
  const request = (input && typeof input === 'object' ? input.request : undefined) as
    { method?: unknown; url?: unknown } | undefined;
  return `Bundle.entry[${index}] (${String(request?.method ?? '?')} ${String(request?.url ?? '?')})`;
}

/** The same error, with a first issue saying which entry caused it. */
export function atEntry(error: unknown, where: string): unknown {
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
