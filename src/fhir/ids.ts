import { AppError } from '../errors.js';

/** An R4 id (https://hl7.org/fhir/R4/datatypes.html#id), as a pattern to build others from. */
export const ID = '[A-Za-z0-9\\-.]{1,64}';

/**
 * A relative literal reference, `Type/id` optionally versioned (`/_history/vid`,
 * https://hl7.org/fhir/R4/references.html#literal): the type and the id captured, in that order.
 */
export const RELATIVE_REFERENCE = `([A-Z][A-Za-z]+)/(${ID})(?:/_history/${ID})?`;

const ID_PATTERN = new RegExp(`^${ID}$`);

export function isValidId(id: string): boolean {
  return ID_PATTERN.test(id) && id !== '.' && id !== '..';
}

export function assertValidId(id: string): void {
  if (!ID_PATTERN.test(id)) {
    throw new AppError('invalid-id', `"${id}" is not a valid resource id (1-64 of A-Z a-z 0-9 - .)`);
  }
  // R4's pattern allows them, but `.` and `..` are path segments that every URL client and proxy
  // resolves (RFC 3986 §5.2.4): `Patient/..` would be a Location that points somewhere else.
  if (id === '.' || id === '..') {
    throw new AppError('invalid-id', `"${id}" cannot be a resource id: it is a relative path segment`);
  }
}

export function parseVersionId(raw: string): number {
  if (!/^[1-9][0-9]{0,9}$/.test(raw)) throw new AppError('invalid-id', `"${raw}" is not a valid version id`);
  return Number(raw);
}

const ETAG = /^\s*(?:W\/)?"?([1-9][0-9]{0,9})"?\s*$/;

/** If-Match: `W/"3"`, `"3"` or `3` → 3; anything else is a bad request. */
export function parseETagVersion(header: string): number {
  const match = ETAG.exec(header);
  if (!match) throw new AppError('bad-request', `If-Match must be an ETag like W/"1", got "${header}"`);
  return Number(match[1]);
}

/** If-None-Match on a read: the version, or undefined for an ETag that is no version of ours (no match). */
export function weakETagVersion(header: string): number | undefined {
  const match = ETAG.exec(header);
  return match ? Number(match[1]) : undefined;
}
