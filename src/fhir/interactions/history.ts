// https://hl7.org/fhir/R4/http.html#history
import { AppError } from '../../errors.js';
import { openCursor, signCursor } from '../../page-cursor.js';
import type { HistoryCursor, StoredVersion } from '../../storage/store.js';
import { binaryVersionsReadable, requireAccess } from '../access.js';
import { bundleJson } from '../bundle.js';
import type { BundleEntry, BundleLink } from '../bundle.js';
import { assertValidId } from '../ids.js';
import { parseCount, parseInstantParameter } from '../query-values.js';
import type { FhirResponse } from '../response.js';
import type { FhirRequest } from '../services.js';

export type HistoryQueryParams = Record<string, string | undefined>;

const METHOD: Record<StoredVersion['operation'], string> = { create: 'POST', update: 'PUT', delete: 'DELETE' };

/** What a history cursor is bound to: the history it pages (of a resource, a type or all) since when. */
function historyList(type: string | undefined, id: string | undefined, since: number | undefined): string {
  return `history:${type ?? ''}/${id ?? ''}?_since=${since ?? ''}`;
}

function encodeCursor(key: string, cursor: HistoryCursor, list: string): string {
  return signCursor(key, [cursor.lastUpdated, cursor.seq], list);
}

function decodeCursor(key: string, token: string, list: string): HistoryCursor {
  const values = openCursor(key, token, list);
  const [lastUpdated, seq] = values ?? [];
  if (values?.length !== 2 || typeof lastUpdated !== 'number' || typeof seq !== 'number')
    throw new AppError('invalid-search', '_cursor is not a cursor this server issued', { expression: '_cursor' });
  return { lastUpdated, seq };
}

function historyEntry(request: FhirRequest, version: StoredVersion): BundleEntry {
  const fullUrl = `${request.services.baseUrl}/${version.type}/${version.id}`;
  return {
    fullUrl,
    resourceText: version.content ?? undefined,
    request: {
      method: METHOD[version.operation],
      url: version.operation === 'create' ? version.type : `${version.type}/${version.id}`,
    },
    response: {
      status: version.operation === 'create' ? '201' : version.operation === 'delete' ? '204' : '200',
      etag: `W/"${version.versionId}"`,
      lastModified: new Date(version.lastUpdated).toISOString(),
    },
  };
}

/** History of one resource (type and id), one type (type only) or the whole system (neither). */
export async function historyInteraction(
  request: FhirRequest,
  params: HistoryQueryParams,
  type?: string,
  id?: string,
): Promise<FhirResponse> {
  if (type) requireAccess(request, 'read', type);
  else {
    for (const t of request.services.types.resourceTypes) {
      if (!request.principal.canFhir('read', t)) {
        throw new AppError('forbidden', 'System history needs read access to every resource type (system/*.r)');
      }
    }
  }
  if (id !== undefined) assertValidId(id);
  // With read replicas, one that has replayed this account's last write may answer.
  const readAfter = request.budget?.readAfter;
  if (type && id) {
    const current = await request.services.store.read(type, id, { readAfter });
    if (!current) throw new AppError('resource-not-found', `${type}/${id} is not known`);
  }
  const count = parseCount(params._count);
  const since = params._since ? parseInstantParameter('_since', params._since) : undefined;
  const list = historyList(type, id, since);
  const cursorKey = await request.services.cursorKey.read();
  const after = params._cursor ? decodeCursor(cursorKey, params._cursor, list) : undefined;
  const maxBytes = request.services.config.maxPageBytes;
  const page = await request.services.store.history({ type, id, since, count, after, readAfter, maxBytes });

  const path = [request.services.baseUrl, type, id, '_history'].filter(Boolean).join('/');
  const linkFor = (cursor?: HistoryCursor): string => {
    const query = new URLSearchParams();
    query.set('_count', String(count));
    if (params._since) query.set('_since', params._since);
    if (cursor) query.set('_cursor', encodeCursor(cursorKey, cursor, list));
    return `${path}?${query.toString()}`;
  };
  const link: BundleLink[] = [
    { relation: 'self', url: linkFor(after) },
    { relation: 'first', url: linkFor() },
  ];
  if (page.next) link.push({ relation: 'next', url: linkFor(page.next) });
  // A Binary version whose securityContext (its own or its Binary's current one) the caller may not read
  // is left out (the page may come short).
  const versions = page.versions.filter(await binaryVersionsReadable(request, page.versions, readAfter));
  return {
    status: 200,
    body: bundleJson({ type: 'history', link, entries: versions.map((v) => historyEntry(request, v)) }),
    accessed: versions.map((v) => `${v.type}/${v.id}`),
  };
}
