// JSON Patch (RFC 6902) on a resource: https://hl7.org/fhir/R4/http.html#patch
import { applyPatch } from 'rfc6902';
import type { Operation } from 'rfc6902';
import { AppError } from '../../errors.js';

const OPS = new Set(['add', 'remove', 'replace', 'move', 'copy', 'test']);

/** Refuses (400) a body that is no JSON Patch: its shape alone, before any resource is read. */
export function assertJsonPatch(patch: unknown): asserts patch is Operation[] {
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

/** The value a JSON Pointer (RFC 6901) names in `doc`, or undefined when there is none. */
function valueAt(doc: unknown, pointer: string): unknown {
  if (pointer === '') return doc;
  let node = doc;
  for (const raw of pointer.split('/').slice(1)) {
    if (node === null || typeof node !== 'object') return undefined;
    const key = raw.replaceAll('~1', '/').replaceAll('~0', '~');
    if (!Object.prototype.hasOwnProperty.call(node, key)) return undefined;
    node = (node as Record<string, unknown>)[key];
  }
  return node;
}

/**
 * Applies the patch to a copy of the resource; a failing operation (a test, a missing path) is 422.
 * `copy` is the one operation that makes a document larger than the patch that asks for it (each copy
 * of the whole document doubles it), so copies are counted against `maxBytes` as they are made: a
 * patch whose copies add more than that is refused (422) before it can exhaust memory. The caller
 * checks the size and depth of the result.
 */
export function applyJsonPatch<T>(resource: T, patch: unknown, maxBytes = Infinity): T {
  assertJsonPatch(patch);
  let copied = 0;
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
  prefixed.forEach((op, i) => {
    let error: Error | null;
    try {
      if (op.op === 'copy') {
        const value = valueAt(holder, op.from);
        copied += value === undefined ? 0 : Buffer.byteLength(JSON.stringify(value));
        if (copied > maxBytes) {
          throw new AppError(
            'patch-failed',
            `JSON Patch operation ${i} (copy ${patch[i].path}): the copies add more than ${maxBytes} bytes, the most a resource may have`,
          );
        }
      }
      [error] = applyPatch(holder, [op]);
    } catch (thrown) {
      if (thrown instanceof AppError) throw thrown;
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
