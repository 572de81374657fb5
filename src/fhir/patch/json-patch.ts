// JSON Patch (RFC 6902) on a resource: https://hl7.org/fhir/R4/http.html#patch
import { applyPatch, Pointer } from 'rfc6902';
import type { Operation } from 'rfc6902';
import { AppError } from '../../errors.js';

const OPS = new Set(['add', 'remove', 'replace', 'move', 'copy', 'test']);

function assertOperations(patch: unknown): asserts patch is Operation[] {
  if (!Array.isArray(patch)) throw new AppError('bad-request', 'A JSON Patch body must be an array of operations');
  patch.forEach((op, i) => {
    const o = op as Record<string, unknown>;
    if (!o || typeof o !== 'object' || !OPS.has(o.op as string) || typeof o.path !== 'string') {
      throw new AppError('bad-request', `JSON Patch operation ${i} needs "op" (${[...OPS].join(', ')}) and a "path"`);
    }
    if (['add', 'replace', 'test'].includes(o.op as string) && !('value' in o)) {
      throw new AppError('bad-request', `JSON Patch operation ${i} (${String(o.op)}) needs a "value"`);
    }
    if (['move', 'copy'].includes(o.op as string) && typeof o.from !== 'string') {
      throw new AppError('bad-request', `JSON Patch operation ${i} (${String(o.op)}) needs a "from"`);
    }
  });
}

/**
 * What the `copy` operations of one patch may add, in characters of JSON: a copy duplicates a subtree, so a
 * 1 KB patch of 22 copies of /name into /name/- made a 71 MB resource (each copy doubles it) and a few more
 * exhaust the heap. The other operations add only what the body holds, which its size limit bounds.
 */
export const MAX_COPIED_CHARS = 16 * 1024 * 1024;

/** Applies the patch to a copy of the resource; a failing operation (a test, a missing path) is 422. */
export function applyJsonPatch<T>(resource: T, patch: unknown): T {
  assertOperations(patch);
  const copy = structuredClone(resource);
  // rfc6902 patches objects in place; wrapping lets an operation on "" replace the whole document.
  const holder = { doc: copy };
  const prefixed = patch.map((op) => ({
    ...op,
    path: `/doc${op.path}`,
    ...('from' in op ? { from: `/doc${op.from}` } : {}),
  })) as Operation[];
  // One operation at a time, stopping at the first that fails: rfc6902 reports most failures as
  // results but throws for some (a TypeError for `add /active` after the document became `true`).
  let copied = 0;
  prefixed.forEach((op, i) => {
    if (op.op === 'copy') {
      // Measured before copying; the measuring costs at most what the limit allows, plus one subtree.
      const value: unknown = Pointer.fromJSON(op.from).get(holder);
      copied += value === undefined ? 0 : JSON.stringify(value).length;
      if (copied > MAX_COPIED_CHARS) {
        throw new AppError(
          'patch-too-costly',
          `JSON Patch operation ${i} (copy ${patch[i].path}): the copies of this patch add more than ${MAX_COPIED_CHARS} characters`,
        );
      }
    }
    let error: Error | null;
    try {
      [error] = applyPatch(holder, [op]);
    } catch (thrown) {
      error = thrown instanceof Error ? thrown : new Error(String(thrown));
    }
    if (error) {
      const reason = error.name === 'TestError' ? 'the test failed' : error.message.replaceAll('/doc', '');
      throw new AppError(
        'patch-failed',
        `JSON Patch operation ${i} (${patch[i].op} ${patch[i].path}) cannot be applied: ${reason}`,
      );
    }
  });
  return holder.doc;
}
