// https://hl7.org/fhir/R4/http.html#binary and https://hl7.org/fhir/R4/binary.html#rest: a Binary is
// written and read as its raw content. This module turns raw content into the Binary resource that is
// stored, and a stored Binary back into its content; HTTP framing lives in http/body-parsers.ts and
// http/binary-reply.ts.
import { AppError } from '../errors.js';
import { isValidId } from './ids.js';
import type { ReferenceParser } from './references.js';

/** A request body stored as it is (anything but a Binary resource in FHIR JSON sent to a Binary). */
export class RawContent {
  constructor(
    /** The request's Content-Type header, undefined when the request named none. */
    readonly contentType: string | undefined,
    readonly bytes: Buffer,
  ) {}
}

/** RFC 9110 §5.6.2 token characters. */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/**
 * A Content-Type header as Binary.contentType (BCP 13, a FHIR `code`): type and subtype in lower case,
 * parameters (charset and the like) kept with their values as sent, joined by "; ". No header means
 * application/octet-stream (RFC 9110 §8.3). A header that is no media type is a 415.
 */
export function binaryContentType(header: string | undefined): string {
  if (header === undefined || header.trim() === '') return 'application/octet-stream';
  const [mediaType, ...rawParams] = splitParameters(header);
  const slash = mediaType.indexOf('/');
  const type = mediaType.slice(0, slash).toLowerCase();
  const subtype = mediaType.slice(slash + 1).toLowerCase();
  if (slash < 0 || !TOKEN.test(type) || !TOKEN.test(subtype)) throw notAMediaType(header);
  const params: string[] = [];
  for (const param of rawParams) {
    if (param === '') continue;
    const eq = param.indexOf('=');
    const name = param.slice(0, eq).trim().toLowerCase();
    const value = param.slice(eq + 1).trim();
    if (eq < 0 || !TOKEN.test(name) || !(TOKEN.test(value) || /^"(?:[^"\\\r\n]|\\.)*"$/.test(value))) {
      throw notAMediaType(header);
    }
    params.push(`${name}=${value}`);
  }
  const contentType = [`${type}/${subtype}`, ...params].join('; ');
  // A FHIR code has no leading, trailing or doubled whitespace (a quoted parameter could hold some), and
  // what goes back out as a Content-Type header must be plain ASCII.
  if (!/^[\x21-\x7e]+( [\x21-\x7e]+)*$/.test(contentType)) throw notAMediaType(header);
  return contentType;
}

/** Splits at the semicolons that are not inside a quoted string. */
function splitParameters(header: string): string[] {
  const parts: string[] = [];
  let current = '';
  let quoted = false;
  for (let i = 0; i < header.length; i++) {
    const ch = header[i];
    if (quoted && ch === '\\' && i + 1 < header.length) {
      current += ch + header[++i];
      continue;
    }
    if (ch === '"') quoted = !quoted;
    if (ch === ';' && !quoted) {
      parts.push(current.trim());
      current = '';
    } else {
      current += ch;
    }
  }
  parts.push(current.trim());
  return parts;
}

function notAMediaType(header: string): AppError {
  return new AppError('unsupported-media-type', `Content-Type ${JSON.stringify(header)} is not a media type`);
}

/**
 * The X-Security-Context header (https://hl7.org/fhir/R4/http.html#binary) as Binary.securityContext:
 * a relative reference `Type/id` to a resource type R4 defines. Anything else is a 400, so that a
 * misspelt context never leaves a Binary without the access control its writer meant.
 */
export function securityContextReference(
  header: string | undefined,
  isResourceType: (name: string) => boolean,
): { reference: string } | undefined {
  if (header === undefined) return undefined;
  const value = header.trim();
  const [type, id, ...rest] = value.split('/');
  if (rest.length > 0 || !isResourceType(type ?? '') || !isValidId(id ?? '')) {
    throw new AppError(
      'bad-request',
      `X-Security-Context ${JSON.stringify(header)} is not a reference of the form Type/id to a FHIR R4 resource`,
    );
  }
  return { reference: `${type}/${id}` };
}

/**
 * The Binary resource for raw content: contentType from the request, data the bytes in base64. Empty
 * content is a 400 (Binary.data cannot be an empty string, and an empty upload is almost always a
 * client's mistake). `id` is the URL's on an update.
 */
export function binaryFromRaw(
  raw: RawContent,
  securityContext: { reference: string } | undefined,
  id?: string,
): Record<string, unknown> {
  if (raw.bytes.length === 0) {
    throw new AppError('bad-request', 'The request body is empty: a Binary needs content');
  }
  return {
    resourceType: 'Binary',
    ...(id === undefined ? {} : { id }),
    contentType: binaryContentType(raw.contentType),
    ...(securityContext ? { securityContext } : {}),
    data: raw.bytes.toString('base64'),
  };
}

/**
 * Whether a JSON body sent to a Binary is a Binary resource (stored as FHIR JSON) rather than content
 * that happens to be JSON (stored as it is): R4 http.html#binary's "special case where the content is
 * actually a Binary resource".
 */
export function isBinaryResource(body: unknown): boolean {
  return (
    body !== null &&
    typeof body === 'object' &&
    !Array.isArray(body) &&
    (body as { resourceType?: unknown }).resourceType === 'Binary'
  );
}

/**
 * A stored Binary's content: its contentType and its bytes (none when the Binary has no `data`). A
 * contentType that is no media type (a Binary written as FHIR JSON only has to hold a `code`) goes out
 * as application/octet-stream: it could not be a Content-Type header as it is.
 */
export function binaryContent(stored: string | Record<string, unknown>): { contentType: string; bytes: Buffer } {
  const resource = (typeof stored === 'string' ? JSON.parse(stored) : stored) as {
    contentType?: unknown;
    data?: unknown;
  };
  const contentType = servableContentType(resource.contentType);
  const bytes = typeof resource.data === 'string' ? Buffer.from(resource.data, 'base64') : Buffer.alloc(0);
  return { contentType, bytes };
}

function servableContentType(contentType: unknown): string {
  if (typeof contentType !== 'string') return 'application/octet-stream';
  try {
    return binaryContentType(contentType);
  } catch {
    return 'application/octet-stream';
  }
}

/**
 * The resource type a Binary's `securityContext` stands for (https://hl7.org/fhir/R4/binary.html: the
 * resource whose access rules the Binary takes): undefined when it has none, '*' when it names something
 * that is no resource of this server (another server, an identifier only), which only a caller who may
 * read every type may then read.
 */
export function securityContextType(
  /** The Binary, or its JSON text as stored (a serializer's output). */
  binary: string | Record<string, unknown>,
  references: ReferenceParser,
): string | undefined {
  // A serializer spells a key as it is: text without the word has no securityContext, and the content
  // (megabytes of base64 in `data`) need not be parsed to know it (search pages, history, exports).
  if (typeof binary === 'string' && !binary.includes('"securityContext"')) return undefined;
  const resource = (typeof binary === 'string' ? JSON.parse(binary) : binary) as { securityContext?: unknown };
  const context = resource.securityContext;
  if (context === undefined || context === null) return undefined;
  const reference = (context as { reference?: unknown }).reference;
  return (typeof reference === 'string' && references.local(reference)?.type) || '*';
}

/**
 * May a caller who reads the types `canRead` accepts see this Binary's content? Yes without a
 * securityContext; with one, only with read access to the type it points at, or to every type when it
 * names nothing of this server.
 */
export function binaryContextReadable(
  binary: string | Record<string, unknown>,
  references: ReferenceParser,
  resourceTypes: readonly string[],
  canRead: (type: string) => boolean,
): boolean {
  const context = securityContextType(binary, references);
  if (context === undefined) return true;
  return context === '*' ? resourceTypes.every(canRead) : canRead(context);
}
