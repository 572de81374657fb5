// The bearer check on every authenticated request (all of /fhir but the metadata, the scribe API):
//   1. the header is exactly `Bearer <JWT>` (one space, nothing else);
//   2. the auth state version is read (one single-row query): the account cache is current after it;
//   3. the token's signature and claims: verified once, then cached until it expires;
//   4. the account: exists, active, has API access, and the token was issued after any revocation (its
//      token generation is the account's: exact, whatever the clock says; see isRevoked);
//   5. the account's rate limit, if it has one: one point per request; `chargeMore` takes the rest of a
//      request that costs more (a batch or transaction Bundle: one point per entry) once its body is read.
// Any failure in 1-4 is 401 with `WWW-Authenticate: Bearer error="invalid_token"` and does not count
// against the rate limit; 5 is 429 with Retry-After.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import type { Account, AccountStore } from './accounts.js';
import type { AccountCache, AuthStateVersion } from './auth-state.js';
import { rememberPrincipal } from './audit.js';
import type { AuditLog } from './audit.js';
import type { AccountRateLimiter } from './rate-counters.js';
import type { Authenticator, FhirAction, Principal } from './principal.js';
import { ScopeSet } from './scopes.js';
import { TokenRefused } from './tokens.js';
import type { TokenService, VerifiedToken } from './tokens.js';

export const WWW_AUTHENTICATE = 'Bearer error="invalid_token"';

/**
 * docs/api.md and the specification ask for exactly `Bearer <token>`: the scheme as written (not case-insensitive as
 * RFC 7235 would allow), one space, a compact JWS, nothing more.
 */
const BEARER = /^Bearer ([A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)$/;

/** The caller of an authenticated request: what its token grants, within what its account still has. */
export class TokenPrincipal implements Principal {
  constructor(
    readonly accountId: string,
    readonly username: string,
    private readonly token: ScopeSet,
    private readonly account: ScopeSet,
    readonly expiresAt?: number,
  ) {}

  get scopes(): readonly string[] {
    return this.token.scopes;
  }

  canFhir(action: FhirAction, type: string): boolean {
    return this.token.allows(action, type) && this.account.allows(action, type);
  }

  hasScope(scope: string): boolean {
    return this.token.has(scope) && this.account.has(scope);
  }
}

/**
 * The caller of work that runs after its request (an export job): what its token granted then, within
 * what the account has now, looked up anew on each call, so scopes taken from the account since apply.
 * Undefined once the account is deleted, inactive or without API access: such work may read nothing.
 * `tokenScopes` undefined (a job stored without them): the account's scopes alone.
 */
export async function currentPrincipal(
  accounts: Pick<AccountStore, 'findById'>,
  accountId: string,
  tokenScopes: readonly string[] | undefined,
): Promise<Principal | undefined> {
  const account = await accounts.findById(accountId);
  if (!account || !account.active || !account.apiAccess) return undefined;
  const granted = new ScopeSet(account.scopes);
  return new TokenPrincipal(account.id, account.username, tokenScopes ? new ScopeSet(tokenScopes) : granted, granted);
}

export type RefusalReason =
  | 'missing'
  | 'not-bearer'
  | 'account-deleted'
  | 'account-inactive'
  | 'no-api-access'
  | 'revoked'
  | TokenRefused['reason'];

const MESSAGES: Partial<Record<RefusalReason, string>> = {
  missing: 'Authentication required: send the header Authorization: Bearer <access token>',
  'not-bearer': 'The Authorization header must be exactly "Bearer <access token>"',
  expired: 'The access token has expired: request a new one from the token endpoint',
};

export interface BearerAuthenticatorParts {
  readonly version: AuthStateVersion;
  readonly tokens: TokenService;
  readonly accounts: AccountCache;
  readonly rateLimiter: AccountRateLimiter;
  readonly audit: AuditLog;
}

/**
 * Was the token issued before a revocation of its account? A token carries the account's token generation
 * at issue, and each revocation adds one to it. A token issued before generations existed carries none: it
 * is judged by its iat against the last revocation time in whole seconds, as it was, and any revocation
 * since generations exist ends it.
 */
export function isRevoked(token: VerifiedToken, account: Account): boolean {
  if (token.generation !== undefined) return token.generation < account.tokenGeneration;
  return token.iat < account.tokensNotBefore || account.tokenGeneration > 0;
}

/** ScopeSets of accounts, reused while the account's scopes stay the same. */
const accountScopeSets = new WeakMap<Account, ScopeSet>();

export class BearerAuthenticator implements Authenticator {
  /** The rate-limited account of each authenticated request, for `chargeMore`. */
  private readonly limited = new WeakMap<FastifyRequest, Account>();

  constructor(private readonly parts: BearerAuthenticatorParts) {}

  async authenticate(request: FastifyRequest, reply: FastifyReply): Promise<Principal> {
    const { version, tokens, accounts } = this.parts;
    const header = request.headers.authorization;
    if (header === undefined || header === '') throw this.refuse(request, 'missing');
    const match = BEARER.exec(header);
    if (!match) throw this.refuse(request, 'not-bearer');

    const stateVersion = await version.read();
    let token: VerifiedToken;
    try {
      token = await tokens.verify(match[1], stateVersion);
    } catch (error) {
      if (error instanceof TokenRefused) throw this.refuse(request, error.reason, undefined, error.detail);
      throw error;
    }

    const account = await accounts.get(token.accountId, stateVersion);
    if (!account) throw this.refuse(request, 'account-deleted', token);
    if (!account.active) throw this.refuse(request, 'account-inactive', token);
    if (!account.apiAccess) throw this.refuse(request, 'no-api-access', token);
    if (isRevoked(token, account)) throw this.refuse(request, 'revoked', token);

    let accountScopes = accountScopeSets.get(account);
    if (!accountScopes) {
      accountScopes = new ScopeSet(account.scopes);
      accountScopeSets.set(account, accountScopes);
    }
    const principal = new TokenPrincipal(account.id, account.username, token.scopes, accountScopes, token.exp * 1000);
    rememberPrincipal(request, principal);

    if (account.rateLimit !== null) {
      this.limited.set(request, account);
      await this.charge(request, reply, account, account.rateLimit, 1);
    }
    return principal;
  }

  /**
   * Takes `points` more from the rate limit of an authenticated request's account (none when it has no
   * limit). Past the limit: 429 with Retry-After, and the points are given back, so that a refused Bundle
   * costs what any refused request costs (its one point) and a smaller one can follow.
   */
  async chargeMore(request: FastifyRequest, reply: FastifyReply, points: number): Promise<void> {
    const account = this.limited.get(request);
    if (!account || account.rateLimit === null || points <= 0) return;
    await this.charge(
      request,
      reply,
      account,
      account.rateLimit,
      points,
      `this Bundle counts ${points + 1}, one per entry`,
    );
  }

  private async charge(
    request: FastifyRequest,
    reply: FastifyReply,
    account: Account,
    limit: number,
    points: number,
    /** Set for an extra charge: a refusal gives its points back, and the message says what they were for. */
    extra?: string,
  ): Promise<void> {
    const { rateLimiter } = this.parts;
    const decision = await rateLimiter.consume(account.id, limit, points);
    const headers: Record<string, string> = {
      'RateLimit-Limit': String(decision.limit),
      'RateLimit-Remaining': String(decision.remaining),
      'RateLimit-Reset': String(decision.resetSeconds),
      'RateLimit-Policy': `${decision.limit};w=60`,
    };
    if (!decision.allowed) {
      if (extra) await rateLimiter.refund(account.id, limit, points);
      this.parts.audit.event(
        'warn',
        'auth.rate_limited',
        request,
        {
          account_id: account.id,
          username: account.username,
          outcome: 'rate-limited',
          limit: decision.limit,
          points,
        },
        'rate limit exceeded',
      );
      throw new AppError(
        'rate-limited',
        `Rate limit of ${decision.limit} requests per minute exceeded${extra ? ` (${extra})` : ''}: retry after ${decision.resetSeconds} s`,
        { headers: { ...headers, 'Retry-After': String(decision.resetSeconds) } },
      );
    }
    reply.headers(headers);
  }

  private refuse(request: FastifyRequest, reason: RefusalReason, token?: VerifiedToken, detail?: string): AppError {
    this.parts.audit.event(
      'warn',
      'auth.refused',
      request,
      { outcome: 'refused', status: 401, reason, ...(token ? { account_id: token.accountId, jti: token.jti } : {}) },
      'bearer token refused',
    );
    return new AppError('unauthenticated', detail ?? MESSAGES[reason] ?? 'The access token is not valid', {
      headers: { 'WWW-Authenticate': WWW_AUTHENTICATE },
    });
  }
}
