// Bundles are assembled from the stored JSON text of each resource, so a page is never parsed and
// re-serialised (https://hl7.org/fhir/R4/bundle.html).

export interface BundleLink {
  readonly relation: string;
  readonly url: string;
}

export interface BundleEntry {
  readonly fullUrl?: string;
  /** The stored JSON text of the resource. */
  readonly resourceText?: string;
  readonly search?: Record<string, unknown>;
  readonly request?: Record<string, unknown>;
  readonly response?: Record<string, unknown>;
}

export interface BundleParts {
  readonly type: 'searchset' | 'history' | 'transaction-response' | 'batch-response';
  readonly total?: number;
  readonly link?: readonly BundleLink[];
  readonly entries: readonly BundleEntry[];
  readonly timestamp?: string;
}

function entryJson(entry: BundleEntry): string {
  const parts: string[] = [];
  if (entry.fullUrl !== undefined) parts.push(`"fullUrl":${JSON.stringify(entry.fullUrl)}`);
  if (entry.resourceText !== undefined) parts.push(`"resource":${entry.resourceText}`);
  if (entry.search !== undefined) parts.push(`"search":${JSON.stringify(entry.search)}`);
  if (entry.request !== undefined) parts.push(`"request":${JSON.stringify(entry.request)}`);
  if (entry.response !== undefined) parts.push(`"response":${JSON.stringify(entry.response)}`);
  return `{${parts.join(',')}}`;
}

export function bundleJson(bundle: BundleParts): string {
  const head: Record<string, unknown> = {
    resourceType: 'Bundle',
    id: crypto.randomUUID(),
    meta: { lastUpdated: new Date().toISOString() },
    type: bundle.type,
  };
  if (bundle.timestamp) head.timestamp = bundle.timestamp;
  if (bundle.total !== undefined) head.total = bundle.total;
  if (bundle.link && bundle.link.length > 0) head.link = bundle.link;
  const headJson = JSON.stringify(head);
  if (bundle.entries.length === 0) return headJson;
  return `${headJson.slice(0, -1)},"entry":[${bundle.entries.map(entryJson).join(',')}]}`;
}
