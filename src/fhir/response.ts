// What a FHIR interaction answers, independent of HTTP framing: the Fastify adapter (http/fhir-routes.ts)
// turns it into status, headers (Location, ETag, Last-Modified) and a body, honouring Prefer and _pretty.

export interface FhirResponse {
  readonly status: number;
  /** A resource as stored JSON text (sent as is), or an object to serialise. */
  readonly body?: string | Record<string, unknown>;
  readonly versionId?: number;
  /** Milliseconds since the epoch. */
  readonly lastModified?: number;
  /** Absolute URL of the version written (Location on create/update). */
  readonly location?: string;
  /** True for create/update/patch: the body is the written resource, subject to Prefer: return=... */
  readonly isWrite?: boolean;
  /** `Type/id` of every resource the response returns or the request wrote, for the audit trail. */
  readonly accessed?: readonly string[];
  /** A body that is no FHIR resource (`$versions`' plain form): its media type, else FHIR JSON. */
  readonly contentType?: 'application/json';
  /** Content-Location alone (an asynchronous request's status URL), where `location` sets both. */
  readonly contentLocation?: string;
  /**
   * The body is the same text for every client until it changes (the CapabilityStatement): the HTTP layer
   * may keep its compressed forms instead of compressing it per request.
   */
  readonly sharedBody?: boolean;
}
