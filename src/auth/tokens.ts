// Access tokens: JWTs (RFC 9068 `at+jwt`) signed with ES256, verified with ES256 only and only with keys
// in use in the database, with exact expiry (exp = iat + TTL, no leeway: the server verifies its own
// tokens). Only tokens the server could have issued pass: `aud` the FHIR base, `iat` not ahead of now,
// `exp - iat` not beyond the configured lifetime (so a token minted with a stolen key cannot outlive a
// revocation or last for years). Verifying a signature costs about 0.1 ms, so verified tokens are kept
// until they expire: a repeated token costs one Map lookup, plus a check that its key was not retired
// since. The account behind a token is checked on every request elsewhere (authenticator.ts).
import { randomUUID } from 'node:crypto';
import { decodeJwt, errors as joseErrors, jwtVerify, SignJWT } from 'jose';
import type { JWTHeaderParameters } from 'jose';
import { ScopeSet } from './scopes.js';
import { SIGNING_ALGORITHM } from './signing-keys.js';
import type { KeyRing } from './signing-keys.js';

export const TOKEN_TYPE = 'at+jwt';

/** The private claim holding the account's token generation at issue (revocation, accounts.ts). */
export const TOKEN_GENERATION_CLAIM = 'token_generation';

export interface VerifiedToken {
  readonly accountId: string;
  readonly kid: string;
  readonly iat: number;
  readonly exp: number;
  readonly jti: string;
  readonly scopes: ScopeSet;
  /** The account's token generation when it was issued (accounts.ts); undefined in tokens issued before generations existed. */
  readonly generation: number | undefined;
}

export interface IssuedToken {
  readonly token: string;
  readonly jti: string;
  readonly kid: string;
  readonly iat: number;
  readonly exp: number;
}

/** Why a token was refused (logged, never sent back in detail). */
export type TokenFailure = 'expired' | 'bad-signature' | 'unknown-kid' | 'bad-algorithm' | 'malformed' | 'bad-claims';

export class TokenRefused extends Error {
  /** @param detail what the client should be told, where the reason alone does not say what to do */
  constructor(
    readonly reason: TokenFailure,
    readonly detail?: string,
  ) {
    super(`token refused: ${reason}`);
  }
}

/**
 * How far ahead of this process's clock a token's `iat` may be: server processes on several hosts may
 * disagree by a fraction of a second. Anything further ahead was not issued by us.
 */
export const IAT_AHEAD_SECONDS = 2;

export interface TokenServiceOptions {
  readonly issuer: string;
  /** The `aud` of every token: the FHIR base, `${AMBIENT_PUBLIC_URL}/fhir`. */
  readonly audience: string;
  readonly ttlSeconds: number;
  readonly cacheSize?: number;
  /** The clock in milliseconds (tests). */
  readonly now?: () => number;
}

export class TokenService {
  private readonly cache = new Map<string, VerifiedToken>();
  private readonly cacheSize: number;
  private readonly now: () => number;

  constructor(
    private readonly keys: KeyRing,
    private readonly options: TokenServiceOptions,
  ) {
    this.cacheSize = options.cacheSize ?? 10_000;
    this.now = options.now ?? Date.now;
  }

  /**
   * Signs a token for an account. `generation` is the account's token generation as read for this token
   * request: a revocation committed since makes the token refused from its first use.
   * `maxTtlSeconds` shortens the lifetime below the configured one (client_credentials: 300 s).
   */
  async issue(
    accountId: string,
    scope: string,
    version: number,
    generation: number,
    maxTtlSeconds = this.options.ttlSeconds,
  ): Promise<IssuedToken> {
    const { kid, privateKey } = await this.keys.signingKey(version);
    const iat = Math.floor(this.now() / 1000);
    const exp = iat + Math.min(this.options.ttlSeconds, maxTtlSeconds);
    const jti = randomUUID();
    const token = await new SignJWT({ scope, [TOKEN_GENERATION_CLAIM]: generation })
      .setProtectedHeader({ alg: SIGNING_ALGORITHM, kid, typ: TOKEN_TYPE })
      .setIssuer(this.options.issuer)
      .setAudience(this.options.audience)
      .setSubject(accountId)
      .setIssuedAt(iat)
      .setExpirationTime(exp)
      .setJti(jti)
      .sign(privateKey);
    return { token, jti, kid, iat, exp };
  }

  /** Verifies a token (cached until it expires); throws TokenRefused. `version` is this request's auth state version. */
  async verify(token: string, version: number): Promise<VerifiedToken> {
    const nowSeconds = Math.floor(this.now() / 1000);
    const cached = this.cache.get(token);
    if (cached) {
      if (cached.exp <= nowSeconds) {
        this.cache.delete(token);
        throw new TokenRefused('expired');
      }
      // A key retired since the token was cached: the key ring is current for this request's version.
      await this.keys.sync(version);
      if (this.keys.has(cached.kid)) return cached;
      this.cache.delete(token);
      throw new TokenRefused(
        'unknown-kid',
        'The access token was signed with a key this server has retired: request a new one',
      );
    }
    const verified = await this.verifySignature(token, version);
    if (verified.exp <= nowSeconds) throw new TokenRefused('expired');
    if (verified.iat > nowSeconds + IAT_AHEAD_SECONDS) throw new TokenRefused('bad-claims');
    if (verified.exp - verified.iat > this.options.ttlSeconds) throw new TokenRefused('bad-claims');
    if (this.cache.size >= this.cacheSize) this.evict(nowSeconds);
    this.cache.set(token, verified);
    return verified;
  }

  private async verifySignature(token: string, version: number): Promise<VerifiedToken> {
    let unknownKid = false;
    try {
      const { payload, protectedHeader } = await jwtVerify(
        token,
        async (header: JWTHeaderParameters) => {
          if (header.alg !== SIGNING_ALGORITHM) throw new TokenRefused('bad-algorithm');
          const key = typeof header.kid === 'string' ? await this.keys.publicKey(header.kid, version) : undefined;
          if (!key) {
            unknownKid = true;
            throw new TokenRefused('unknown-kid');
          }
          return key;
        },
        {
          algorithms: [SIGNING_ALGORITHM],
          issuer: this.options.issuer,
          audience: this.options.audience,
          typ: TOKEN_TYPE,
          requiredClaims: ['sub', 'aud', 'iat', 'exp', 'jti', 'scope'],
          clockTolerance: 0,
          currentDate: new Date(this.now()),
        },
      );
      const { sub, iat, exp, jti, scope, [TOKEN_GENERATION_CLAIM]: generation } = payload as Record<string, unknown>;
      if (
        typeof sub !== 'string' ||
        typeof iat !== 'number' ||
        typeof exp !== 'number' ||
        typeof jti !== 'string' ||
        typeof scope !== 'string' ||
        (generation !== undefined && !(Number.isSafeInteger(generation) && (generation as number) >= 0))
      ) {
        throw new TokenRefused('bad-claims');
      }
      return {
        accountId: sub,
        kid: protectedHeader.kid!,
        iat,
        exp,
        jti,
        scopes: ScopeSet.of(scope),
        generation: generation as number | undefined,
      };
    } catch (error) {
      if (unknownKid) throw new TokenRefused('unknown-kid', this.foreignTokenDetail(token));
      if (error instanceof TokenRefused) throw error;
      if (error instanceof joseErrors.JWTExpired) throw new TokenRefused('expired');
      if (error instanceof joseErrors.JWTClaimValidationFailed && (error.claim === 'iss' || error.claim === 'aud')) {
        throw new TokenRefused('bad-claims', this.foreignTokenDetail(token));
      }
      if (error instanceof joseErrors.JWSSignatureVerificationFailed) throw new TokenRefused('bad-signature');
      if (error instanceof joseErrors.JOSEAlgNotAllowed) throw new TokenRefused('bad-algorithm');
      if (error instanceof joseErrors.JWTClaimValidationFailed) throw new TokenRefused('bad-claims');
      throw new TokenRefused('malformed');
    }
  }

  /**
   * Why a token that another server (or this one under another public URL) issued is refused, naming the
   * issuer and audience it carries (unverified, cut short: they are no secret) and the ones expected.
   */
  private foreignTokenDetail(token: string): string {
    let claims: { iss?: unknown; aud?: unknown } = {};
    try {
      claims = decodeJwt(token);
    } catch {
      // Not even a JWT: say only what is expected.
    }
    const shown = (value: unknown) => JSON.stringify(value ?? null).slice(0, 200);
    return (
      `The access token was not issued by this server: it names issuer ${shown(claims.iss)} and audience ` +
      `${shown(claims.aud)}, this server issues tokens as ${JSON.stringify(this.options.issuer)} for audience ` +
      `${JSON.stringify(this.options.audience)} (AMBIENT_PUBLIC_URL): request one from this server's token endpoint`
    );
  }

  /** Drops expired entries; if the cache is still full, drops the oldest half. */
  private evict(nowSeconds: number): void {
    for (const [token, entry] of this.cache) if (entry.exp <= nowSeconds) this.cache.delete(token);
    if (this.cache.size < this.cacheSize) return;
    let drop = Math.ceil(this.cache.size / 2);
    for (const token of this.cache.keys()) {
      if (drop-- <= 0) break;
      this.cache.delete(token);
    }
  }
}
