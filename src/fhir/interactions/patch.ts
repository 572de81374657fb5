// https://hl7.org/fhir/R4/http.html#patch (JSON Patch and FHIRPath Patch)
import { AppError } from '../../errors.js';
import type { ErrorCode } from '../../errors.js';
import type { FhirResource, ResourceStore } from '../../storage/store.js';
import { requireAccess, requireBinaryContext } from '../access.js';
import { assertValidId } from '../ids.js';
import { jsonDepth, MAX_JSON_DEPTH } from '../json-limits.js';
import { applyFhirPathPatch } from '../patch/fhirpath-patch.js';
import { applyJsonPatch, assertJsonPatch } from '../patch/json-patch.js';
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
  checkPatch(request, type, format, patch);
  assertValidId(id);
  // Read, patch and write under one row lock: a concurrent update waits rather than being overwritten.
  return request.services.store.transaction((store) => patchStored(request, store, type, id, format, patch, ifMatch));
}

/**
 * What a patch needs before any resource is read: `u`, and `r` when it reads (SMART v2: a JSON Patch
 * `test` answers yes or no about the stored resource, `copy` and `move` take values from it, and every
 * FHIRPath Patch evaluates the client's paths against it; `add`, `remove` and `replace` only write, and
 * the answer then carries no resource without `r`); a JSON Patch well formed. What is wrong with the
 * patch itself is said before the resource is read: it tells nothing of it.
 */
export function checkPatch(request: FhirRequest, type: string, format: PatchFormat, patch: unknown): void {
  requireAccess(request, 'update', type);
  if (patchReads(format, patch)) requireAccess(request, 'read', type);
  if (format === 'json-patch') assertJsonPatch(patch);
}

/** Inside the write's transaction: reads `type/id` locked, applies the patch, writes the result. */
export async function patchStored(
  request: FhirRequest,
  store: ResourceStore,
  type: string,
  id: string,
  format: PatchFormat,
  patch: unknown,
  ifMatch?: number,
): Promise<FhirResponse> {
  const mayRead = request.principal.canFhir('read', type);
  const current = await store.read(type, id, { lock: true });
  if (!current) throw new AppError('resource-not-found', `${type}/${id} is not known`);
  if (current.deleted || !current.content) throw new AppError('resource-deleted', `${type}/${id} was deleted`);
  // Before the patch touches it: every patch of a Binary acts on (and `test`, `copy`, `move` read) its content.
  if (type === 'Binary') requireBinaryContext(request, current.content, 'change');
  if (ifMatch !== undefined && ifMatch !== current.versionId) {
    throw new AppError(
      'precondition-failed',
      `Version conflict: If-Match names version ${ifMatch}, the current version is ${current.versionId}`,
    );
  }
  const base = JSON.parse(current.content) as FhirResource;
  try {
    const { maxBodyBytes } = request.services.config;
    const patched =
      format === 'json-patch' ? applyJsonPatch(base, patch, maxBodyBytes) : applyFhirPathPatch(base, patch);
    if (!patched || typeof patched !== 'object' || patched.resourceType !== type || patched.id !== id) {
      throw new AppError('patch-failed', 'A patch must not change the resource type or id');
    }
    assertWithinBodyLimits(patched, maxBodyBytes);
    const resource = await acceptResource(request, type, patched, id);
    const { stored } = await store.update({ ...resource, id }, { ifMatch: current.versionId });
    return writeResponse(request, stored, 200);
  } catch (error) {
    if (mayRead || !(error instanceof AppError) || !CONTENT_REFUSALS.has(error.code)) throw error;
    throw patchRefusedWithoutRead(type, id);
  }
}

/**
 * The refusals whose reason depends on what the stored resource holds: a path that is not there (or
 * runs into a primitive, whose value the message would quote), a result that breaks R4's rules (whose
 * issues name the elements it has), or one too large.
 */
const CONTENT_REFUSALS: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'patch-failed',
  'invalid-resource',
  'invalid-resource-standard',
  'invariant-violated-standard',
  'too-many-index-rows',
]);

/**
 * The one answer to a caller without `r` whose patch cannot be applied, whatever the reason: any reason
 * would tell which elements the resource has, or their values, to a caller who may not read it. Whether
 * the patch applied or not is all it learns (see docs/api.md).
 */
function patchRefusedWithoutRead(type: string, id: string): AppError {
  return new AppError(
    'patch-failed',
    `The patch cannot be applied to ${type}/${id}, and nothing was changed. The reason is told only to a caller ` +
      `who may read ${type} (system/${type}.r): it would tell what the resource holds.`,
  );
}

/** Does applying the patch read the stored resource (beyond finding the paths it writes)? */
function patchReads(format: PatchFormat, patch: unknown): boolean {
  if (format === 'fhirpath-patch') return true;
  if (!Array.isArray(patch)) return false;
  return patch.some((op) => {
    const name = op !== null && typeof op === 'object' ? (op as { op?: unknown }).op : undefined;
    return name === 'test' || name === 'copy' || name === 'move';
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
