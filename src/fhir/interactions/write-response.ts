import type { StoredVersion } from '../../storage/store.js';
import { mayReadBinary } from '../access.js';
import type { FhirResponse } from '../response.js';
import type { FhirRequest, FhirServices } from '../services.js';

export function versionUrl(services: FhirServices, type: string, id: string, versionId: number): string {
  return `${services.baseUrl}/${type}/${id}/_history/${versionId}`;
}

/**
 * The answer to a create, update or patch: the written resource with its Location and ETag. The
 * resource goes back only to a caller whose scopes grant `r` on its type (SMART v2: writing is not
 * reading); otherwise the answer is what `Prefer: return=minimal` gives, whatever the client prefers.
 * That matters most for a conditional create that finds its match, whose body is the stored resource,
 * and there a Binary's securityContext rules its content as it does a read's.
 */
export function writeResponse(request: FhirRequest, stored: StoredVersion, status: number): FhirResponse {
  const mayRead =
    request.principal.canFhir('read', stored.type) &&
    (stored.type !== 'Binary' || !stored.content || mayReadBinary(request, stored.content));
  return {
    status,
    body: mayRead ? (stored.content ?? undefined) : undefined,
    versionId: stored.versionId,
    lastModified: stored.lastUpdated,
    location: versionUrl(request.services, stored.type, stored.id, stored.versionId),
    isWrite: true,
    accessed: [`${stored.type}/${stored.id}`],
  };
}
