import type { StoredVersion } from '../../storage/store.js';
import type { FhirResponse } from '../response.js';
import type { FhirServices } from '../services.js';

export function versionUrl(services: FhirServices, type: string, id: string, versionId: number): string {
  return `${services.baseUrl}/${type}/${id}/_history/${versionId}`;
}

/** The answer to a create, update or patch: the written resource with its Location and ETag. */
export function writeResponse(services: FhirServices, stored: StoredVersion, status: number): FhirResponse {
  return {
    status,
    body: stored.content ?? undefined,
    versionId: stored.versionId,
    lastModified: stored.lastUpdated,
    location: versionUrl(services, stored.type, stored.id, stored.versionId),
    isWrite: true,
    accessed: [`${stored.type}/${stored.id}`],
  };
}
