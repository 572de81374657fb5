// https://hl7.org/fhir/R4/http.html#patch (JSON Patch and FHIRPath Patch)
import { AppError } from '../../errors.js';
import type { FhirResource } from '../../storage/store.js';
import { requireAccess } from '../access.js';
import { assertValidId } from '../ids.js';
import { jsonDepth, MAX_JSON_DEPTH } from '../json-limits.js';
import { applyFhirPathPatch } from '../patch/fhirpath-patch.js';
import { applyJsonPatch } from '../patch/json-patch.js';
import { acceptResource } from '../resource-input.js';
import type { FhirResponse } from '../response.js';
import type { FhirRequest } from '../services.js';
import { writeResponse } from './write-response.js';

export type PatchFormat = 'json-patch' | 'fhirpath-patch';

export async function patchInteraction(
  request: FhirRequest,
  type: string,
  id: string,
  format: PatchFormat,
  patch: unknown,
  ifMatch?: number,
): Promise<FhirResponse> {
  requireAccess(request, 'update', type);
  // A patch is applied to the stored resource, so its outcome tells about that resource: a JSON Patch
  // `test` answers yes or no, an operation on a missing path fails, a FHIRPath path (with where())
  // selects or not, and validating the result can quote values a `copy` or `move` placed elsewhere.
  // Any PATCH therefore needs `r` as well as `u` (PUT, which replaces the whole resource, needs only `u`).
  requireAccess(request, 'read', type);
  assertValidId(id);
  // Read, patch and write under one row lock: a concurrent update waits rather than being overwritten.
  return request.services.store.transaction(async (store) => {
    const current = await store.read(type, id, { lock: true });
    if (!current) throw new AppError('resource-not-found', `${type}/${id} is not known`);
    if (current.deleted || !current.content) throw new AppError('resource-deleted', `${type}/${id} was deleted`);
    if (ifMatch !== undefined && ifMatch !== current.versionId) {
      throw new AppError(
        'precondition-failed',
        `Version conflict: If-Match names version ${ifMatch}, the current version is ${current.versionId}`,
      );
    }
    const base = JSON.parse(current.content) as FhirResource;
    const { maxBodyBytes } = request.services.config;
    const patched =
      format === 'json-patch' ? applyJsonPatch(base, patch, maxBodyBytes) : applyFhirPathPatch(base, patch);
    if (!patched || typeof patched !== 'object' || patched.resourceType !== type || patched.id !== id) {
      throw new AppError('patch-failed', 'A patch must not change the resource type or id');
    }
    assertWithinBodyLimits(patched, maxBodyBytes);
    const resource = acceptResource(request.services, type, patched, id);
    const { stored } = await store.update({ ...resource, id }, { ifMatch: current.versionId });
    return writeResponse(request, stored, 200);
  });
}

/**
 * A patch must not produce what no client could send as a body: a resource nested deeper than the
 * body limit (nothing could walk it back out: validation, serialisation and the stores recurse) or
 * larger than AMBIENT_MAX_BODY_BYTES. Depth is checked first, so serialising to measure is safe.
 */
function assertWithinBodyLimits(resource: FhirResource, maxBytes: number): void {
  if (jsonDepth(resource, MAX_JSON_DEPTH) > MAX_JSON_DEPTH) {
    throw new AppError('patch-failed', `The patched resource would be nested deeper than ${MAX_JSON_DEPTH} levels`);
  }
  const bytes = Buffer.byteLength(JSON.stringify(resource));
  if (bytes > maxBytes) {
    throw new AppError(
      'patch-failed',
      `The patched resource would have ${bytes} bytes, more than the ${maxBytes} a resource may have (AMBIENT_MAX_BODY_BYTES)`,
    );
  }
}
