// A read answers a stored resource as the text it was stored as (DESIGN.md: no re-serialising), so the
// text is checked before it goes out: one that does not parse as a JSON object of the asked type and id
// was not written by this server (a hand edit of the database, a damaged disk) and must never be served
// as the resource. It is a storage error (500 `exception`), not the client's: the message names the
// resource and never quotes its content (neither does the log line it makes, http/error-handler.ts).
import { AppError } from '../errors.js';

/**
 * The stored text as a response body, once checked: refused (500 stored-content-corrupt) when it is not
 * the resource `type`/`id` in JSON. The text itself is the body (sent as stored), but for a Binary, which
 * is mostly answered as its decoded bytes (http/binary-reply.ts): its body is the object just parsed,
 * so that up to 16 MiB of it are not parsed twice.
 */
export function storedResourceBody(
  content: string,
  type: string,
  id: string,
  versionId: number,
): string | Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(content);
  } catch {
    // The SyntaxError's own message quotes the text: it is dropped, not wrapped.
    throw corrupt(type, id, versionId, 'does not parse as JSON');
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw corrupt(type, id, versionId, 'is not a JSON object');
  }
  const { resourceType, id: storedId } = parsed as { resourceType?: unknown; id?: unknown };
  if (resourceType !== type || storedId !== id) throw corrupt(type, id, versionId, 'names another resource');
  return type === 'Binary' ? (parsed as Record<string, unknown>) : content;
}

function corrupt(type: string, id: string, versionId: number, why: string): AppError {
  return new AppError(
    'stored-content-corrupt',
    `The stored content of ${type}/${id} (version ${versionId}) ${why}: it was not written by this server and is not served. An administrator should restore it from a backup or an earlier version.`,
  );
}
