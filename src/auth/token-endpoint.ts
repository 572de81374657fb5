// POST /v1/ambient/api/auth/token: the OAuth 2.0 password grant (RFC 6749 §4.3) for service accounts, and
// the client_credentials grant with a JWT client assertion (RFC 7523) of SMART Backend Services
// (https://hl7.org/fhir/smart-app-launch/backend-services.html).
// Order of checks: credentials in the URL (400) → HTTPS (403) → form body and fields (400) → a slot in the
// lockout counters, taken before any password or assertion is checked (429 when none is left) →
// credentials (401, one body for every cause: invalid_grant for a password, invalid_client for an
// assertion; one argon2 verification for every cause of a password failure) → requested scope (400) →
// token (200). Failed passwords and failed assertions count against the same lockout counters.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { decodeJwt } from 'jose';
import { AppError } from '../errors.js';
import type { Account, AccountStore } from './accounts.js';
import { MAX_USERNAME_LENGTH, normalizeUsername } from './accounts.js';
import type { AuthStateVersion } from './auth-state.js';
import type { UsernameHasher } from './auth-secret.js';
import type { AuditLog } from './audit.js';
import {
  AssertionJtis,
  AssertionRefused,
  CLIENT_ASSERTION_TYPE,
  CLIENT_CREDENTIALS_TOKEN_TTL_SECONDS,
  MAX_ASSERTION_LIFETIME_SECONDS,
  MAX_ASSERTION_LENGTH,
  verifyClientAssertion,
} from './client-assertion.js';
import type { AssertionFailure } from './client-assertion.js';
import { addressCounterKey, isLoginLock } from './rate-counters.js';
import type { LoginGuard, LoginLock, LoginReservation } from './rate-counters.js';
import { MAX_PASSWORD_LENGTH, verifyPassword } from './passwords.js';
import { parseScope, ScopeSet, splitScopes } from './scopes.js';
import type { TokenService } from './tokens.js';
import { clientAddress, isHttps, isLoopbackAddress } from './transport.js';
import { pathOf, queryOf } from '../url-parts.js';

export const TOKEN_PATH = '/v1/ambient/api/auth/token';

const FORM = 'application/x-www-form-urlencoded';

/**
 * The most bytes a token request may have: its fields are short (a username, a password of at most
 * MAX_PASSWORD_LENGTH, a scope list), but for a client assertion of up to MAX_ASSERTION_LENGTH (16 KiB).
 * Anyone may send one, before any check: a larger body is refused (413) from its Content-Length, or as
 * it arrives, never read or parsed.
 */
export const TOKEN_BODY_LIMIT = MAX_ASSERTION_LENGTH + 4 * 1024;
const INVALID_CREDENTIALS = 'Invalid username or password, or the account may not use the API';

export interface TokenEndpointParts {
  readonly accounts: AccountStore;
  readonly version: AuthStateVersion;
  readonly tokens: TokenService;
  readonly guard: LoginGuard;
  readonly audit: AuditLog;
  readonly usernames: UsernameHasher;
  /** A hash of a random password: unknown usernames are verified against it (same work, same timing). */
  readonly dummyHash: string;
  /** The token endpoint's public URL: the `aud` a client assertion must carry. */
  readonly tokenUrl: string;
  /** Used client assertion `jti`s (replays are refused). */
  readonly jtis: AssertionJtis;
  /** The clock in milliseconds (tests). */
  readonly now?: () => number;
}

/** The grants this endpoint serves (discovery lists them). */
export const GRANT_TYPES = ['client_credentials', 'password'] as const;

type GrantType = (typeof GRANT_TYPES)[number];

type FailureReason =
  'unknown-user' | 'wrong-password' | 'inactive' | 'no-api-access' | 'no-client-keys' | AssertionFailure;

/** What the account store holds for a username that names an account. */
type Credentials = NonNullable<Awaited<ReturnType<AccountStore['findCredentials']>>>;

const INVALID_CLIENT = 'The client assertion was refused, or the account may not use the API';

/**
 * What a client whose assertion was signed by one of the account's registered keys is told about why it
 * was refused anyway: it has proved it holds the key, so naming the claim tells no one else anything.
 * Every failure before the signature is verified (no such account, no keys, an unknown key, a bad
 * signature) keeps the one answer, so that none of them tells whether an account exists.
 */
function assertionRefusal(parts: TokenEndpointParts, reason: FailureReason): string {
  const told: Partial<Record<FailureReason, string>> = {
    'wrong-audience': `its aud must be this server's token endpoint, ${parts.tokenUrl}`,
    expired: 'it has expired (exp is past)',
    'exp-too-far': `its exp is more than ${MAX_ASSERTION_LIFETIME_SECONDS} seconds ahead`,
    'bad-claims': 'a claim it needs (iss, sub, aud, exp, jti) is missing or malformed',
    'replayed-jti': 'its jti was used before: sign a new assertion, with a new jti, for each token request',
    inactive: 'the account is inactive',
    'no-api-access': 'the account may not use the API',
  };
  const reasonTold = told[reason];
  return reasonTold ? `The client assertion was refused: ${reasonTold}` : INVALID_CLIENT;
}

/**
 * Query parameters that carry secrets (RFC 6749 §2.3.1, RFC 7523): a client that puts one in the URL has
 * leaked it to every proxy and access log on the way, so the request is refused rather than served.
 */
const CREDENTIAL_PARAMETERS = ['username', 'password', 'client_secret', 'client_assertion'];

/** The credential parameters a URL's query carries (names compared case-insensitively, to be safe). */
function credentialsInQuery(url: string): string[] {
  const names = new Set([...new URLSearchParams(queryOf(url)).keys()].map((n) => n.toLowerCase()));
  return CREDENTIAL_PARAMETERS.filter((name) => names.has(name));
}

function field(body: Record<string, unknown>, name: string): string | undefined {
  const value = body[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw new AppError('bad-request', `The field "${name}" must be given once`);
  return value;
}

/** Checks made before the body is parsed: credentials travel only over HTTPS, and only in a form. */
async function beforeBody(audit: AuditLog, request: FastifyRequest): Promise<void> {
  const inQuery = credentialsInQuery(request.url);
  if (inQuery.length > 0) {
    throw new AppError(
      'bad-request',
      `Credentials must be in the request body, never in the URL (found: ${inQuery.join(', ')}); treat them as disclosed`,
    );
  }
  if (!isHttps(request) && !isLoopbackAddress(clientAddress(request))) {
    audit.event(
      'warn',
      'login.https_required',
      request,
      { outcome: 'refused', status: 403 },
      'token request over plain HTTP refused',
    );
    throw new AppError(
      'https-required',
      'Credentials must be sent over HTTPS: the token endpoint refuses plain HTTP from addresses other than loopback. ' +
        'Serve HTTPS (TLS_CERT_FILE and TLS_KEY_FILE), call from this machine (loopback), or put a TLS proxy in front ' +
        'and name it in AMBIENT_TRUST_PROXY',
    );
  }
  const contentType = (request.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
  if (contentType !== FORM) {
    throw new AppError('bad-request', `The token request must be ${FORM} with the fields username and password`);
  }
}

/** The requested scopes, each one known (invalid_scope otherwise); whether granted is checked later. */
function requestedScopes(scopeField: string | undefined): string[] {
  const requested = scopeField === undefined ? [] : splitScopes(scopeField);
  const unknown = requested.map((s) => parseScope(s)).filter((p): p is string => typeof p === 'string');
  if (unknown.length > 0) throw new AppError('invalid-scope', `Unknown scope: ${unknown.join('; ')}`);
  return requested;
}

/** How the audit log names an attempt: the account, or for a username that matches none a keyed hash only. */
function attemptFields(
  usernames: UsernameHasher,
  username: string,
  found: Credentials | undefined,
): Record<string, unknown> {
  return found ? accountFields(found.account) : { username_hmac: usernames.fingerprint(username) };
}

/** A slot in the lockout counters for this attempt (429 when a lock refuses it). */
async function reserve(
  parts: TokenEndpointParts,
  request: FastifyRequest,
  username: string,
  lockEpoch: number | undefined,
  named: Record<string, unknown>,
): Promise<LoginReservation> {
  // The account's unlock epoch is part of its counters' keys: `account unlock` moves it, and from then
  // on every process counts the username afresh, in process or in Redis alike.
  const reservation = await parts.guard.reserve({
    user: `${parts.usernames.counterKey(username)}.${lockEpoch ?? 0}`,
    address: addressCounterKey(clientAddress(request)),
  });
  if (isLoginLock(reservation)) {
    parts.audit.event(
      'warn',
      'login.locked',
      request,
      {
        outcome: 'locked',
        status: 429,
        locked_by: reservation.by,
        retry_after: reservation.retryAfterSeconds,
        ...named,
      },
      'login refused: locked out',
    );
    throw new AppError(
      'login-locked',
      `Too many failed logins: try again in ${reservation.retryAfterSeconds} seconds`,
      {
        headers: { 'Retry-After': String(reservation.retryAfterSeconds) },
      },
    );
  }
  return reservation;
}

/** A failed attempt: counted (its slots stay taken) and logged, with the locks it started. */
async function refuse(
  parts: TokenEndpointParts,
  request: FastifyRequest,
  reservation: LoginReservation,
  reason: FailureReason,
  named: Record<string, unknown>,
  grantType: GrantType,
): Promise<void> {
  const locks = await parts.guard.failed(reservation);
  parts.audit.event(
    'warn',
    'login.failed',
    request,
    { outcome: 'failure', status: 401, reason, grant_type: grantType, ...named },
    'login failed',
  );
  for (const started of locks) {
    parts.audit.event(
      'warn',
      'login.lockout',
      request,
      { outcome: 'locked', locked_by: started.by, lockout_seconds: started.retryAfterSeconds, ...named },
      LOCKOUT_MESSAGES[started.by],
    );
  }
}

/** One attempt at an account's credentials, as a grant names them. */
interface Attempt {
  /** The normalized username (for client_credentials, the assertion's issuer). */
  readonly username: string;
  readonly grantType: GrantType;
  /** The grant's own verification: the reason it fails, or undefined when it passes. */
  readonly check: (found: Credentials | undefined) => Promise<FailureReason | undefined>;
  /** The error a failure answers with: one for every cause, unless the cause may be told (below). */
  readonly refusal: (reason: FailureReason) => AppError;
}

/**
 * The account an attempt authenticates: a slot in the lockout counters is taken before its credentials are
 * checked; a failure is counted and logged, then refused.
 */
async function authenticate(parts: TokenEndpointParts, request: FastifyRequest, attempt: Attempt): Promise<Account> {
  const found = await parts.accounts.findCredentials(attempt.username);
  const named = attemptFields(parts.usernames, attempt.username, found);
  const reservation = await reserve(parts, request, attempt.username, found?.loginLockEpoch, named);
  const failure = await attempt.check(found);
  if (failure || !found) {
    await refuse(parts, request, reservation, failure ?? 'unknown-user', named, attempt.grantType);
    throw attempt.refusal(failure ?? 'unknown-user');
  }
  await parts.guard.succeeded(reservation);
  return found.account;
}

/** Why an account whose credentials were verified may still not have a token. */
function accountFailure(account: Account): FailureReason | undefined {
  return !account.active ? 'inactive' : !account.apiAccess ? 'no-api-access' : undefined;
}

/** The token for an authenticated account: the requested scopes (all of the account's when none), if granted. */
async function grant(
  parts: TokenEndpointParts,
  request: FastifyRequest,
  account: Account,
  requested: readonly string[],
  grantType: GrantType,
): Promise<Record<string, unknown>> {
  const granted = new ScopeSet(account.scopes);
  const beyond = requested
    .map((s) => parseScope(s))
    .filter((p) => typeof p !== 'string' && !granted.covers(p))
    .map((p) => (p as { scope: string }).scope);
  if (beyond.length > 0) {
    throw new AppError('invalid-scope', `The account is not granted: ${beyond.join(' ')}`);
  }
  const scope = (requested.length > 0 ? requested : account.scopes).join(' ');

  const stateVersion = await parts.version.read();
  const maxTtl = grantType === 'client_credentials' ? CLIENT_CREDENTIALS_TOKEN_TTL_SECONDS : undefined;
  const issued = await parts.tokens.issue(account.id, scope, stateVersion, account.tokenGeneration, maxTtl);
  parts.audit.event(
    'info',
    'token.issued',
    request,
    {
      outcome: 'success',
      ...accountFields(account),
      grant_type: grantType,
      jti: issued.jti,
      kid: issued.kid,
      scope,
      expires_at: new Date(issued.exp * 1000).toISOString(),
    },
    'access token issued',
  );
  return { access_token: issued.token, token_type: 'bearer', expires_in: issued.exp - issued.iat, scope };
}

/** The fields of a password grant, each one checked (400 otherwise). */
function passwordRequest(
  form: Record<string, unknown>,
  grantType: string | undefined,
): { rawUsername: string; password: string; requested: string[] } {
  const rawUsername = field(form, 'username');
  const password = field(form, 'password');
  const scopeField = field(form, 'scope');
  if (grantType !== undefined && grantType !== 'password') {
    throw new AppError(
      'unsupported-grant-type',
      `grant_type "${grantType}" is not supported: use password or client_credentials`,
    );
  }
  if (!rawUsername) throw new AppError('bad-request', 'The field "username" is missing');
  if (!password) throw new AppError('bad-request', 'The field "password" is missing');
  if (rawUsername.length > 4 * MAX_USERNAME_LENGTH) throw new AppError('bad-request', 'The username is too long');
  if (password.length > MAX_PASSWORD_LENGTH) throw new AppError('bad-request', 'The password is too long');
  return { rawUsername, password, requested: requestedScopes(scopeField) };
}

/** The password grant (grant_type=password, or none given). */
async function passwordGrant(
  parts: TokenEndpointParts,
  request: FastifyRequest,
  form: Record<string, unknown>,
  grantType: string | undefined,
): Promise<Record<string, unknown>> {
  const { rawUsername, password, requested } = passwordRequest(form, grantType);
  const account = await authenticate(parts, request, {
    username: normalizeUsername(rawUsername),
    grantType: 'password',
    check: async (found) => {
      // Always one argon2 verification, whatever the cause of a failure, so timing tells nothing.
      const passwordOk = await verifyPassword(found?.passwordHash ?? parts.dummyHash, password);
      return !found ? 'unknown-user' : !passwordOk ? 'wrong-password' : accountFailure(found.account);
    },
    refusal: () => new AppError('invalid-credentials', INVALID_CREDENTIALS),
  });
  return grant(parts, request, account, requested, 'password');
}

/** The fields of a client_credentials grant, each one checked (400 otherwise); `scope` is required. */
function assertionRequest(form: Record<string, unknown>): {
  assertion: string;
  clientIdField: string | undefined;
  requested: string[];
} {
  const assertionType = field(form, 'client_assertion_type');
  const assertion = field(form, 'client_assertion');
  const scopeField = field(form, 'scope');
  const clientIdField = field(form, 'client_id');
  if (!assertionType) throw new AppError('bad-request', 'The field "client_assertion_type" is missing');
  if (assertionType !== CLIENT_ASSERTION_TYPE) {
    throw new AppError('bad-request', `client_assertion_type must be ${CLIENT_ASSERTION_TYPE}`);
  }
  if (!assertion) throw new AppError('bad-request', 'The field "client_assertion" is missing');
  if (assertion.length > MAX_ASSERTION_LENGTH) throw new AppError('bad-request', 'The client assertion is too long');
  if (!scopeField || splitScopes(scopeField).length === 0) {
    throw new AppError('bad-request', 'The field "scope" is missing: client_credentials needs the scopes asked for');
  }
  return { assertion, clientIdField, requested: requestedScopes(scopeField) };
}

/**
 * The client_id: the assertion's issuer, read before the signature is checked (it names the keys);
 * undefined when there is none, or one too long to be a username.
 */
function assertionIssuer(assertion: string): string | undefined {
  let clientId: string | undefined;
  try {
    const claims = decodeJwt(assertion);
    clientId = typeof claims.iss === 'string' && claims.iss !== '' ? claims.iss : undefined;
  } catch {
    clientId = undefined;
  }
  return clientId === undefined || clientId.length > 4 * MAX_USERNAME_LENGTH ? undefined : clientId;
}

/** Why a client assertion does not authenticate the account its issuer names (undefined when it does). */
async function assertionFailure(
  parts: TokenEndpointParts,
  found: Credentials | undefined,
  claimed: { assertion: string; clientId: string; clientIdField: string | undefined; username: string },
): Promise<FailureReason | undefined> {
  if (!found) return 'unknown-user';
  if (found.account.clientKeys.length === 0) return 'no-client-keys';
  if (claimed.clientIdField !== undefined && normalizeUsername(claimed.clientIdField) !== claimed.username) {
    return 'wrong-issuer';
  }
  const nowMs = (parts.now ?? Date.now)();
  try {
    const verified = await verifyClientAssertion(claimed.assertion, found.account.clientKeys, {
      clientId: claimed.clientId,
      audience: parts.tokenUrl,
      nowMs,
    });
    if (!(await parts.jtis.use(claimed.username, verified.jti, verified.exp, Math.floor(nowMs / 1000)))) {
      return 'replayed-jti';
    }
  } catch (error) {
    if (!(error instanceof AssertionRefused)) throw error;
    return error.reason;
  }
  return accountFailure(found.account);
}

/**
 * SMART Backend Services: grant_type=client_credentials, authenticated by a client assertion signed with
 * one of the account's registered keys (client-assertion.ts).
 */
async function clientCredentialsGrant(
  parts: TokenEndpointParts,
  request: FastifyRequest,
  form: Record<string, unknown>,
): Promise<Record<string, unknown>> {
  const { assertion, clientIdField, requested } = assertionRequest(form);
  const clientId = assertionIssuer(assertion);
  if (clientId === undefined) {
    parts.audit.event(
      'warn',
      'login.failed',
      request,
      { outcome: 'failure', status: 401, reason: 'malformed', grant_type: 'client_credentials' },
      'login failed',
    );
    throw new AppError('invalid-client', `${INVALID_CLIENT} (the assertion has no issuer)`);
  }
  const username = normalizeUsername(clientId);
  const account = await authenticate(parts, request, {
    username,
    grantType: 'client_credentials',
    check: (found) => assertionFailure(parts, found, { assertion, clientId, clientIdField, username }),
    refusal: (reason) => new AppError('invalid-client', assertionRefusal(parts, reason)),
  });
  return grant(parts, request, account, requested, 'client_credentials');
}

async function handleTokenRequest(parts: TokenEndpointParts, request: FastifyRequest, reply: FastifyReply) {
  const body = request.body;
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new AppError('bad-request', `The token request must be ${FORM} with the fields username and password`);
  }
  const form = body as Record<string, unknown>;
  const grantType = field(form, 'grant_type');
  if (grantType === 'client_credentials') return reply.send(await clientCredentialsGrant(parts, request, form));
  return reply.send(await passwordGrant(parts, request, form, grantType));
}

/** Route options of the token path for every method. */
const EVERY_METHOD = {
  // RFC 6749 §5.1: no caching of token responses, the errors included (Cache-Control: no-store comes
  // from http/cache-control.ts, as on every response; Pragma for HTTP/1.0 caches).
  onSend: async (_request: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    reply.header('Pragma', 'no-cache');
    return payload;
  },
  // Fastify logs each request line; on this path it never carries the query (credentials sent there
  // by mistake are refused, and must not reach the log either).
  logSerializers: {
    req: (request: FastifyRequest) => ({
      method: request.method,
      url: pathOf(request.url),
      remoteAddress: request.ip,
    }),
  },
};

const TOKEN_RESPONSE_SCHEMA = {
  type: 'object',
  required: ['access_token', 'token_type', 'expires_in', 'scope'],
  properties: {
    access_token: { type: 'string' },
    token_type: { type: 'string', enum: ['bearer'] },
    expires_in: { type: 'integer' },
    scope: { type: 'string' },
  },
};

export function registerTokenEndpoint(app: FastifyInstance, parts: TokenEndpointParts): void {
  app.route({
    ...EVERY_METHOD,
    method: 'POST',
    url: TOKEN_PATH,
    onRequest: async (request) => beforeBody(parts.audit, request),
    bodyLimit: TOKEN_BODY_LIMIT,
    schema: { response: { 200: TOKEN_RESPONSE_SCHEMA } },
    handler: async (request, reply) => handleTokenRequest(parts, request, reply),
  });
  app.route({
    ...EVERY_METHOD,
    method: ['GET', 'PUT', 'PATCH', 'DELETE'],
    url: TOKEN_PATH,
    handler: async () => {
      throw new AppError('method-not-allowed', `Use POST ${TOKEN_PATH}`, { headers: { Allow: 'POST' } });
    },
  });
}

function accountFields(account: Account): Record<string, unknown> {
  return { account_id: account.id, username: account.username };
}

const LOCKOUT_MESSAGES: Record<LoginLock['by'], string> = {
  'username-address':
    'too many failed logins for one username from one client address: further attempts from it are refused for a while (the account stays enabled)',
  username:
    'too many failed logins for one username from every address together: attempts from addresses it has not logged in from are refused for a while',
  address: 'too many failed logins from one client address: further attempts from it are refused for a while',
};
