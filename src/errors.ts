// The error catalog: every error the product answers has one entry here with a stable code, its HTTP
// status and its FHIR issue type (HAPI's lesson: errors with stable codes are searchable and testable).
// One error handler (http/error-handler.ts) turns an AppError into an OperationOutcome or, on the
// non-FHIR endpoints, into the OAuth error shape.

export interface CatalogEntry {
  readonly status: number;
  /** FHIR IssueType (https://hl7.org/fhir/R4/valueset-issue-type.html). */
  readonly issueType: string;
  /** RFC 6749 §5.2 error code for the non-FHIR endpoints. */
  readonly oauthError: string;
}

export const ERROR_CATALOG = {
  'bad-request': { status: 400, issueType: 'invalid', oauthError: 'invalid_request' },
  'invalid-json': { status: 400, issueType: 'structure', oauthError: 'invalid_request' },
  'invalid-xml': { status: 400, issueType: 'structure', oauthError: 'invalid_request' },
  'invalid-search': { status: 400, issueType: 'invalid', oauthError: 'invalid_request' },
  'resource-type-mismatch': { status: 400, issueType: 'invalid', oauthError: 'invalid_request' },
  'id-mismatch': { status: 400, issueType: 'invalid', oauthError: 'invalid_request' },
  'invalid-id': { status: 400, issueType: 'value', oauthError: 'invalid_request' },
  'invalid-resource': { status: 401, issueType: 'invalid', oauthError: 'invalid_request' },
  'invalid-resource-standard': { status: 400, issueType: 'invalid', oauthError: 'invalid_request' },
  'invariant-violated-standard': { status: 422, issueType: 'invariant', oauthError: 'invalid_request' },
  unauthenticated: { status: 401, issueType: 'login', oauthError: 'invalid_token' },
  'invalid-credentials': { status: 401, issueType: 'login', oauthError: 'invalid_grant' },
  // RFC 6749 §5.2: client authentication failed (a SMART Backend Services client assertion).
  'invalid-client': { status: 401, issueType: 'login', oauthError: 'invalid_client' },
  forbidden: { status: 403, issueType: 'forbidden', oauthError: 'insufficient_scope' },
  'https-required': { status: 403, issueType: 'security', oauthError: 'invalid_request' },
  'unsupported-grant-type': { status: 400, issueType: 'not-supported', oauthError: 'unsupported_grant_type' },
  'invalid-scope': { status: 400, issueType: 'invalid', oauthError: 'invalid_scope' },
  'unknown-route': { status: 404, issueType: 'not-found', oauthError: 'not_found' },
  'unknown-resource-type': { status: 404, issueType: 'not-supported', oauthError: 'not_found' },
  'resource-not-found': { status: 404, issueType: 'not-found', oauthError: 'not_found' },
  'version-not-found': { status: 404, issueType: 'not-found', oauthError: 'not_found' },
  'resource-deleted': { status: 410, issueType: 'deleted', oauthError: 'not_found' },
  'method-not-allowed': { status: 405, issueType: 'not-supported', oauthError: 'invalid_request' },
  'not-acceptable': { status: 406, issueType: 'not-supported', oauthError: 'invalid_request' },
  // 400, not 501: docs/api.md allows either, and a 5xx reads as a server fault to clients and monitors.
  'operation-not-supported': { status: 400, issueType: 'not-supported', oauthError: 'invalid_request' },
  'version-conflict': { status: 409, issueType: 'conflict', oauthError: 'invalid_request' },
  'referenced-by-others': { status: 409, issueType: 'conflict', oauthError: 'invalid_request' },
  'reference-not-found': { status: 400, issueType: 'not-found', oauthError: 'invalid_request' },
  'precondition-failed': { status: 412, issueType: 'conflict', oauthError: 'invalid_request' },
  // A conditional update with no match whose body's id names another resource (R5 http.html#cond-update).
  'conditional-id-exists': { status: 409, issueType: 'conflict', oauthError: 'invalid_request' },
  // Criteria searched ahead of a write kept being overtaken by other writes (fhir/conditional.ts).
  'conditional-contended': { status: 409, issueType: 'conflict', oauthError: 'invalid_request' },
  'patch-failed': { status: 422, issueType: 'processing', oauthError: 'invalid_request' },
  // FHIRPath and regular expressions that arrive in a request (src/request-fhirpath/request-fhirpath.ts).
  'fhirpath-unsupported': { status: 400, issueType: 'not-supported', oauthError: 'invalid_request' },
  'fhirpath-too-complex': { status: 400, issueType: 'too-costly', oauthError: 'invalid_request' },
  'fhirpath-too-costly': { status: 422, issueType: 'too-costly', oauthError: 'invalid_request' },
  'payload-too-large': { status: 413, issueType: 'too-long', oauthError: 'invalid_request' },
  'bundle-too-large': { status: 413, issueType: 'too-costly', oauthError: 'invalid_request' },
  'too-many-index-rows': { status: 422, issueType: 'too-costly', oauthError: 'invalid_request' },
  'search-too-costly': { status: 422, issueType: 'too-costly', oauthError: 'invalid_request' },
  'search-timeout': { status: 422, issueType: 'too-costly', oauthError: 'invalid_request' },
  // A search inside a write transaction where nothing could stop it (search/transaction-runner.ts).
  'search-not-bounded': { status: 422, issueType: 'too-costly', oauthError: 'invalid_request' },
  'response-too-large': { status: 422, issueType: 'too-costly', oauthError: 'invalid_request' },
  'terminology-not-found': { status: 404, issueType: 'not-found', oauthError: 'not_found' },
  'terminology-not-supported': { status: 422, issueType: 'not-supported', oauthError: 'invalid_request' },
  'expansion-too-costly': { status: 422, issueType: 'too-costly', oauthError: 'invalid_request' },
  'profile-invalid': { status: 422, issueType: 'invalid', oauthError: 'invalid_request' },
  'profile-too-costly': { status: 422, issueType: 'too-costly', oauthError: 'invalid_request' },
  'unsupported-media-type': { status: 415, issueType: 'not-supported', oauthError: 'invalid_request' },
  'rate-limited': { status: 429, issueType: 'throttled', oauthError: 'slow_down' },
  'login-locked': { status: 429, issueType: 'throttled', oauthError: 'slow_down' },
  'scribe-not-found': { status: 404, issueType: 'not-found', oauthError: 'not_found' },
  'scribe-not-failed': { status: 409, issueType: 'conflict', oauthError: 'invalid_request' },
  'unknown-template': { status: 400, issueType: 'not-found', oauthError: 'invalid_request' },
  'speech-to-text-unavailable': { status: 400, issueType: 'not-supported', oauthError: 'invalid_request' },
  'export-not-found': { status: 404, issueType: 'not-found', oauthError: 'not_found' },
  'too-many-exports': { status: 429, issueType: 'throttled', oauthError: 'slow_down' },
  'export-failed': { status: 500, issueType: 'exception', oauthError: 'server_error' },
  // An export stopped because the account's exports would store more than AMBIENT_EXPORT_MAX_BYTES_PER_ACCOUNT.
  'export-too-large': { status: 422, issueType: 'too-costly', oauthError: 'invalid_request' },
  // Asynchronous requests (export/async-requests.ts, https://hl7.org/fhir/R4/async.html).
  'async-request-not-found': { status: 404, issueType: 'not-found', oauthError: 'not_found' },
  'too-many-async-requests': { status: 429, issueType: 'throttled', oauthError: 'slow_down' },
  'async-request-failed': { status: 500, issueType: 'exception', oauthError: 'server_error' },
  'not-ready': { status: 503, issueType: 'transient', oauthError: 'temporarily_unavailable' },
  // The database was unreachable or the connection was lost (a restart, a failover): retry shortly.
  'database-unavailable': { status: 503, issueType: 'transient', oauthError: 'temporarily_unavailable' },
  // The request bodies held at once reached AMBIENT_MAX_BODY_BYTES_IN_FLIGHT (http/body-budget.ts): retry shortly.
  'server-busy': { status: 503, issueType: 'transient', oauthError: 'temporarily_unavailable' },
  // Stored text that is not the resource it is stored as (fhir/stored-content.ts): never served.
  'stored-content-corrupt': { status: 500, issueType: 'exception', oauthError: 'server_error' },
  internal: { status: 500, issueType: 'exception', oauthError: 'server_error' },
} as const satisfies Record<string, CatalogEntry>;

export type ErrorCode = keyof typeof ERROR_CATALOG;

/** One issue of an OperationOutcome. */
export interface OutcomeIssue {
  severity: 'fatal' | 'error' | 'warning' | 'information';
  code: string;
  diagnostics?: string;
  expression?: string[];
}

export class AppError extends Error {
  readonly entry: CatalogEntry;

  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly options: {
      /** Extra issues (validation): when given they replace the single issue built from message. */
      issues?: OutcomeIssue[];
      expression?: string;
      headers?: Record<string, string>;
    } = {},
  ) {
    super(message);
    this.entry = ERROR_CATALOG[code];
  }

  get status(): number {
    return this.entry.status;
  }
}

/** The OperationOutcome for an error, with the catalog code so clients can match on it. */
export function operationOutcomeFor(error: AppError): Record<string, unknown> {
  const issues: OutcomeIssue[] = error.options.issues ?? [
    {
      severity: 'error',
      code: error.entry.issueType,
      diagnostics: error.message,
      ...(error.options.expression ? { expression: [error.options.expression] } : {}),
    },
  ];
  return {
    resourceType: 'OperationOutcome',
    issue: issues.map((issue) => ({
      ...issue,
      details: { coding: [{ system: 'https://ambient-fhir.dev/errors', code: error.code }] },
    })),
  };
}
