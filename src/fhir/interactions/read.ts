// https://hl7.org/fhir/R4/http.html#read
import { AppError } from '../../errors.js';
import { requireAccess, requireBinaryContext } from '../access.js';
import { assertValidId } from '../ids.js';
import { storedResourceBody } from '../stored-content.js';
import type { FhirResponse } from '../response.js';
import type { FhirRequest } from '../services.js';

export interface ConditionalReadHeaders {
  /** If-None-Match: the version the client holds. */
  readonly ifNoneMatch?: number;
  /** If-Modified-Since, in milliseconds. */
  readonly ifModifiedSince?: number;
}

export async function readInteraction(
  request: FhirRequest,
  type: string,
  id: string,
  conditions: ConditionalReadHeaders = {},
): Promise<FhirResponse> {
  requireAccess(request, 'read', type);
  assertValidId(id);
  const current = await request.services.store.read(type, id, { readAfter: request.budget?.readAfter });
  if (!current) throw new AppError('resource-not-found', `${type}/${id} is not known`);
  if (current.deleted) {
    throw new AppError('resource-deleted', `${type}/${id} was deleted`, {
      headers: { ETag: `W/"${current.versionId}"` },
    });
  }
  // A Binary's content says who may read it (a 304 too tells that it exists): checked, and parsed once, first.
  const binary =
    type === 'Binary' && current.content !== null
      ? storedResourceBody(current.content, type, id, current.versionId)
      : undefined;
  if (binary !== undefined) requireBinaryContext(request, binary, 'read');
  const response = { versionId: current.versionId, lastModified: current.lastUpdated, accessed: [`${type}/${id}`] };
  if (conditions.ifNoneMatch === current.versionId) return { status: 304, ...response };
  // HTTP dates have whole seconds: compare at that precision.
  if (
    conditions.ifModifiedSince !== undefined &&
    Math.floor(current.lastUpdated / 1000) <= Math.floor(conditions.ifModifiedSince / 1000)
  ) {
    return { status: 304, ...response };
  }
  return {
    status: 200,
    body:
      binary ??
      (current.content === null ? undefined : storedResourceBody(current.content, type, id, current.versionId)),
    ...response,
  };
}
