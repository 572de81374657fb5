// The audit trail: one structured JSON log line per security event (token issued, failed login, lockout,
// every 401 and 403), and the access line of every authenticated request, naming the account (written by
// src/http/access-log.ts: one line per request, with `audit: true` when it was authenticated). Every audit
// line has `audit: true` and an `event`, so a log pipeline can route them apart. Passwords and tokens are never
// passed to the logger; a username that matches no account is logged only as a keyed hash (auth-secret.ts),
// since people sometimes type a password into the username field.
import type { FastifyRequest } from 'fastify';
import { pino } from 'pino';
import type { Logger } from '../logger.js';
import type { Principal } from './principal.js';
import { clientAddress } from './transport.js';
import { pathOf } from '../url-parts.js';

export type AuditEvent =
  | 'token.issued'
  | 'login.failed'
  | 'login.lockout'
  | 'login.locked'
  | 'login.https_required'
  | 'auth.refused'
  | 'auth.forbidden'
  | 'auth.rate_limited'
  | 'access';

/** What the FHIR and scribe layers add to a request's access line. */
export interface AccessDetails {
  /** The interaction, e.g. read, search-type, create, scribe.submit. */
  readonly interaction?: string;
  readonly resourceType?: string;
  /** Ids (or Type/id references) of the resources returned or written. */
  readonly ids?: readonly string[];
}

const accessDetails = new WeakMap<FastifyRequest, AccessDetails>();
const principals = new WeakMap<FastifyRequest, Principal>();

/**
 * Adds to the access-log line of an authenticated request (logged once, when the response is sent).
 * Call it as often as useful: ids accumulate, the other fields are replaced.
 */
export function auditAccess(request: FastifyRequest, details: AccessDetails): void {
  const previous = accessDetails.get(request);
  const ids = [...(previous?.ids ?? []), ...(details.ids ?? [])];
  accessDetails.set(request, { ...previous, ...details, ...(ids.length > 0 ? { ids } : {}) });
}

/** Remembers who an authenticated request belongs to (the authenticator calls this). */
export function rememberPrincipal(request: FastifyRequest, principal: Principal): void {
  principals.set(request, principal);
}

/** What the FHIR and scribe layers added to the request's access line (auditAccess). */
export function accessDetailsOf(request: FastifyRequest): AccessDetails | undefined {
  return accessDetails.get(request);
}

/** The principal of a request the authenticator accepted, if any. */
export function principalOf(request: FastifyRequest): Principal | undefined {
  return principals.get(request);
}

export class AuditLog {
  private readonly log: Logger;

  constructor(logger?: Logger) {
    this.log = (logger ?? pino({ level: 'silent' })).child({ audit: true });
  }

  /** A security event about a request: adds the request id, client address, method and path. */
  event(
    level: 'info' | 'warn',
    event: AuditEvent,
    request: FastifyRequest,
    fields: Record<string, unknown>,
    message: string,
  ): void {
    if (!this.log.isLevelEnabled(level)) return;
    this.log[level](
      {
        event,
        req_id: request.id,
        client: clientAddress(request),
        method: request.method,
        path: pathOf(request.url),
        ...fields,
      },
      message,
    );
  }
}
