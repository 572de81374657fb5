/**
 * @medplum/core's FHIRPath engine writes into the JSON it reads when a primitive has a `_name` sibling
 * (https://hl7.org/fhir/R4/json.html#primitive): it merges the sibling into the value with `Object.assign`, which
 * changes the value when it is a JSON object (invalid, but it arrives), and it deletes `__proto__` and `constructor`
 * from the sibling first. The validator must never change what it was given, and copying every resource before each
 * write would cost as much as the validation itself, so only the objects the engine could change, and the objects
 * that lead to them, are copied; the engine then reads the copies.
 */

/** Original object → the copy the engine may change. Undefined when nothing in the input needs one. */
export type FhirPathCopies = ReadonlyMap<object, object> | undefined;

type JsonObject = Record<string, unknown>;

/** Finds what the engine could change in `root` and copies it, with every object and array on the path to it. */
export function fhirPathCopies(root: unknown): FhirPathCopies {
  const copies = new Map<object, object>();
  safeValue(root, copies);
  return copies.size > 0 ? copies : undefined;
}

/** The value the engine should read in place of `value`: its copy when it has one. */
export function forFhirPath<T>(value: T, copies: FhirPathCopies): T {
  return copies && typeof value === 'object' && value !== null
    ? ((copies.get(value) as T | undefined) ?? value)
    : value;
}

/** `value` itself when the engine cannot change anything in it, otherwise a copy (recorded in `copies`). */
function safeValue(value: unknown, copies: Map<object, object>): unknown {
  if (typeof value !== 'object' || value === null) return value;
  return Array.isArray(value) ? safeArray(value, copies) : safeObject(value as JsonObject, copies);
}

function safeArray(array: unknown[], copies: Map<object, object>): unknown[] {
  let copy: unknown[] | undefined;
  for (let i = 0; i < array.length; i++) {
    const safe = safeValue(array[i], copies);
    if (safe !== array[i]) (copy ??= array.slice())[i] = safe;
  }
  return copy ? recorded(array, copy, copies) : array;
}

function safeObject(object: JsonObject, copies: Map<object, object>): JsonObject {
  let copy: JsonObject | undefined;
  let siblings: string[] | undefined;
  for (const key of Object.keys(object)) {
    const child = object[key];
    // The engine only acts on a truthy sibling (and siblings are rare: keep the common path to the recursion).
    if (isExtensionSibling(key) && child) (siblings ??= []).push(key);
    copy = withMember(object, copy, key, safeValue(child, copies));
  }
  for (const sibling of siblings ?? []) {
    const name = sibling.slice(1);
    const value = object[name];
    if (typeof value === 'object' && value !== null) {
      copy = withMember(object, copy, name, assignable((copy ?? object)[name], value, copies));
    }
    copy = withMember(
      object,
      copy,
      sibling,
      withoutDeletableMembers((copy ?? object)[sibling], object[sibling], copies),
    );
  }
  return copy ? recorded(object, copy, copies) : object;
}

/** `copy` (made on the first change) with `key` set to `value`, or undefined while nothing has changed. */
function withMember(
  object: JsonObject,
  copy: JsonObject | undefined,
  key: string,
  value: unknown,
): JsonObject | undefined {
  if (value === (copy ?? object)[key]) return copy;
  const changed = copy ?? { ...object };
  changed[key] = value;
  return changed;
}

/**
 * A primitive's value (or each of its values) that the engine will `Object.assign` the `_name` sibling into: any
 * JSON object there must be a copy. `safe` may already be one, made for something deeper.
 */
function assignable(safe: unknown, original: object, copies: Map<object, object>): unknown {
  if (!Array.isArray(original)) return safe === original ? recorded(original, { ...original }, copies) : safe;
  const items = safe as unknown[];
  let copy: unknown[] | undefined;
  for (let i = 0; i < items.length; i++) {
    const item = items[i];
    if (item !== original[i] || typeof item !== 'object' || item === null) continue;
    (copy ??= items === original ? original.slice() : items)[i] = recorded(item, { ...item }, copies);
  }
  return copy && copy !== items ? recorded(original, copy, copies) : items;
}

/** A `_name` sibling (or each of its items) loses its own `__proto__` and `constructor` members to the engine. */
function withoutDeletableMembers(safe: unknown, original: unknown, copies: Map<object, object>): unknown {
  if (!Array.isArray(original)) return guarded(safe, original, copies);
  const items = safe as unknown[];
  let copy: unknown[] | undefined;
  for (let i = 0; i < items.length; i++) {
    const item = guarded(items[i], original[i], copies);
    if (item !== items[i]) (copy ??= items === original ? original.slice() : items)[i] = item;
  }
  return copy && copy !== items ? recorded(original, copy, copies) : items;
}

function guarded(safe: unknown, original: unknown, copies: Map<object, object>): unknown {
  if (safe !== original || !hasDeletableMember(original)) return safe;
  return recorded(original, { ...original }, copies);
}

function hasDeletableMember(value: unknown): value is JsonObject {
  return (
    typeof value === 'object' &&
    value !== null &&
    (Object.hasOwn(value, '__proto__') || Object.hasOwn(value, 'constructor'))
  );
}

function isExtensionSibling(key: string): boolean {
  return key.charCodeAt(0) === 95; // '_'
}

function recorded<T extends object>(original: object, copy: T, copies: Map<object, object>): T {
  copies.set(original, copy);
  return copy;
}
