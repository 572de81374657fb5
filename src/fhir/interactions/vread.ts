// https://hl7.org/fhir/R4/http.html#vread
import { AppError } from '../../errors.js';
import { requireAccess, requireBinaryContext } from '../access.js';
import { assertValidId, parseVersionId } from '../ids.js';
import { storedResourceBody } from '../stored-content.js';
import type { FhirResponse } from '../response.js';
import type { FhirRequest } from '../services.js';

export async function vreadInteraction(
  request: FhirRequest,
  type: string,
  id: string,
  rawVersionId: string,
): Promise<FhirResponse> {
  requireAccess(request, 'read', type);
  assertValidId(id);
  const versionId = parseVersionId(rawVersionId);
  const version = await request.services.store.vread(type, id, versionId, { readAfter: request.budget?.readAfter });
  if (!version) throw new AppError('version-not-found', `${type}/${id} has no version ${versionId}`);
  if (version.operation === 'delete') {
    throw new AppError('resource-deleted', `Version ${versionId} of ${type}/${id} is its deletion`);
  }
  const body = version.content === null ? undefined : storedResourceBody(version.content, type, id, versionId);
  if (type === 'Binary' && body !== undefined) {
    requireBinaryContext(request, body, 'read');
    // The Binary's current securityContext rules its older versions too.
    const current = await request.services.store.read(type, id, { readAfter: request.budget?.readAfter });
    if (current?.content) requireBinaryContext(request, current.content, 'read');
  }
  return {
    status: 200,
    body,
    versionId,
    lastModified: version.lastUpdated,
    accessed: [`${type}/${id}`],
  };
}
