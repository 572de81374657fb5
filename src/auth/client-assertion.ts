// https://hl7.org/fhir/smart-app-launch/backend-services.html#request-access-token (RFC 7523 §3): the
// client assertion of a SMART Backend Services token request. A JWT signed with one of the account's
// registered keys (RS384 or ES384), `iss` = `sub` = the client_id (the username), `aud` = the token
// endpoint's URL, `exp` in the future and at most five minutes ahead, a `jti` never used before (kept in
// the database until its `exp`, so every server process refuses a replay).
import { decodeProtectedHeader, errors as joseErrors, jwtVerify } from 'jose';
import { UniqueViolationError } from '../storage/sql/database.js';
import type { SqlDatabase } from '../storage/sql/database.js';
import { CLIENT_ASSERTION_ALGORITHMS, importClientKey } from './client-keys.js';
import type { ClientKey } from './client-keys.js';

export const CLIENT_ASSERTION_TYPE = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
/** SMART: an assertion's `exp` is no more than five minutes in the future. */
export const MAX_ASSERTION_LIFETIME_SECONDS = 300;
/** SMART: the access token of a backend service lasts at most five minutes as well. */
export const CLIENT_CREDENTIALS_TOKEN_TTL_SECONDS = 300;
export const MAX_ASSERTION_LENGTH = 16 * 1024;
const MAX_JTI_LENGTH = 255;

/** Why an assertion was refused (logged, never sent back in detail: the client gets `invalid_client`). */
export type AssertionFailure =
  | 'malformed'
  | 'bad-algorithm'
  | 'unknown-key'
  | 'bad-signature'
  | 'wrong-audience'
  | 'wrong-issuer'
  | 'expired'
  | 'exp-too-far'
  | 'bad-claims'
  | 'replayed-jti';

export class AssertionRefused extends Error {
  constructor(readonly reason: AssertionFailure) {
    super(`client assertion refused: ${reason}`);
  }
}

export interface VerifiedAssertion {
  readonly kid: string;
  readonly jti: string;
  readonly exp: number;
}

/**
 * Checks an assertion's signature and claims against the account's keys (the `kid` header picks the key;
 * without one, each key of the header's algorithm is tried). Throws AssertionRefused.
 */
export async function verifyClientAssertion(
  assertion: string,
  keys: readonly ClientKey[],
  options: { clientId: string; audience: string; nowMs: number },
): Promise<VerifiedAssertion> {
  let header: { alg?: unknown; kid?: unknown };
  try {
    header = decodeProtectedHeader(assertion);
  } catch {
    throw new AssertionRefused('malformed');
  }
  const alg = header.alg;
  if (typeof alg !== 'string' || !(CLIENT_ASSERTION_ALGORITHMS as readonly string[]).includes(alg)) {
    throw new AssertionRefused('bad-algorithm');
  }
  if (header.kid !== undefined && typeof header.kid !== 'string') throw new AssertionRefused('malformed');
  const candidates = keys.filter((k) => k.alg === alg && (header.kid === undefined || k.kid === header.kid));
  if (candidates.length === 0) throw new AssertionRefused('unknown-key');

  for (const key of candidates) {
    try {
      const { payload } = await jwtVerify(assertion, await importClientKey(key), {
        algorithms: [alg],
        issuer: options.clientId,
        subject: options.clientId,
        audience: options.audience,
        requiredClaims: ['iss', 'sub', 'aud', 'exp', 'jti'],
        clockTolerance: 0,
        currentDate: new Date(options.nowMs),
      });
      const { exp, jti } = payload;
      if (typeof exp !== 'number' || typeof jti !== 'string' || jti === '' || jti.length > MAX_JTI_LENGTH) {
        throw new AssertionRefused('bad-claims');
      }
      if (exp > Math.floor(options.nowMs / 1000) + MAX_ASSERTION_LIFETIME_SECONDS) {
        throw new AssertionRefused('exp-too-far');
      }
      return { kid: key.kid, jti, exp };
    } catch (error) {
      if (error instanceof AssertionRefused) throw error;
      // Another key of the same algorithm may have signed it (no kid header): try the next one.
      if (error instanceof joseErrors.JWSSignatureVerificationFailed) continue;
      if (error instanceof joseErrors.JWTExpired) throw new AssertionRefused('expired');
      if (error instanceof joseErrors.JWTClaimValidationFailed) {
        if (error.claim === 'aud') throw new AssertionRefused('wrong-audience');
        if (error.claim === 'iss' || error.claim === 'sub') throw new AssertionRefused('wrong-issuer');
        throw new AssertionRefused('bad-claims');
      }
      if (error instanceof joseErrors.JOSEAlgNotAllowed) throw new AssertionRefused('bad-algorithm');
      throw new AssertionRefused('malformed');
    }
  }
  throw new AssertionRefused('bad-signature');
}

/** The `jti`s of accepted assertions, in the database until their `exp` (shared by every server process). */
export class AssertionJtis {
  constructor(private readonly db: SqlDatabase) {}

  /** Records a jti; false when the client used it before (a replay). Drops the expired ones on the way. */
  async use(clientId: string, jti: string, exp: number, nowSeconds: number): Promise<boolean> {
    try {
      await this.db.transaction(async (tx) => {
        await tx.execute('DELETE FROM client_assertion_jti WHERE expires_at < ?', [nowSeconds]);
        await tx.execute('INSERT INTO client_assertion_jti (client_id, jti, expires_at) VALUES (?, ?, ?)', [
          clientId,
          jti,
          exp,
        ]);
      });
      return true;
    } catch (error) {
      if (error instanceof UniqueViolationError) return false;
      throw error;
    }
  }
}
