// The public keys an account registers for SMART Backend Services (https://hl7.org/fhir/smart-app-launch/backend-services.html#registering-a-client-communicating-public-keys):
// a JWKS of RS384 and ES384 public keys, each with a kid. Parsed and checked once, when registered
// (`account create|update --jwks-file`), and stored as the normalised JWKS text.
import { importJWK } from 'jose';
import type { CryptoKey, JWK } from 'jose';

/** The algorithms a client assertion may be signed with (SMART: RS384 and ES384). */
export const CLIENT_ASSERTION_ALGORITHMS = ['RS384', 'ES384'] as const;
export type ClientAssertionAlgorithm = (typeof CLIENT_ASSERTION_ALGORITHMS)[number];

export interface ClientKey {
  readonly kid: string;
  readonly alg: ClientAssertionAlgorithm;
  readonly jwk: JWK;
}

/** A refused JWKS, with a message written for the administrator. */
export class ClientKeyError extends Error {}

/** Members that only a private (or symmetric) key has: a JWKS holding one is refused, the secret is out. */
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];
const MAX_KEYS = 20;
const MAX_KID_LENGTH = 200;
const MIN_RSA_BITS = 2048;

function keyProblem(jwk: Record<string, unknown>): string | undefined {
  const secret = PRIVATE_MEMBERS.filter((m) => m in jwk);
  if (secret.length > 0) {
    return `it is a private or secret key (it has ${secret.map((m) => `"${m}"`).join(', ')}): register the public key only, and treat this one as disclosed`;
  }
  if (typeof jwk.kid !== 'string' || jwk.kid === '') return 'it has no "kid"';
  if (jwk.kid.length > MAX_KID_LENGTH) return `its "kid" is longer than ${MAX_KID_LENGTH} characters`;
  if (jwk.use !== undefined && jwk.use !== 'sig') return `its "use" is "${String(jwk.use)}", not "sig"`;
  if (jwk.kty === 'EC') {
    if (jwk.crv !== 'P-384') return `it is an EC key on curve "${String(jwk.crv)}": ES384 needs P-384`;
    if (jwk.alg !== undefined && jwk.alg !== 'ES384')
      return `its "alg" is "${String(jwk.alg)}": an EC key must be ES384`;
    return undefined;
  }
  if (jwk.kty === 'RSA') {
    if (jwk.alg !== undefined && jwk.alg !== 'RS384')
      return `its "alg" is "${String(jwk.alg)}": an RSA key must be RS384`;
    if (typeof jwk.n !== 'string') return 'it has no modulus "n"';
    if (Buffer.from(jwk.n, 'base64url').length * 8 < MIN_RSA_BITS)
      return `its modulus is shorter than ${MIN_RSA_BITS} bits`;
    return undefined;
  }
  return `its key type "${String(jwk.kty)}" is not accepted: only RS384 (RSA) and ES384 (EC P-384) public keys are`;
}

/** Parses and checks a JWKS text; returns its keys (throws ClientKeyError saying what is wrong). */
export async function parseClientJwks(text: string): Promise<ClientKey[]> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new ClientKeyError('the JWKS is not valid JSON');
  }
  if (parsed === null || typeof parsed !== 'object' || !Array.isArray((parsed as { keys?: unknown }).keys)) {
    throw new ClientKeyError('the JWKS must be a JSON object with a "keys" array');
  }
  const entries = (parsed as { keys: unknown[] }).keys;
  if (entries.length === 0) throw new ClientKeyError('the JWKS holds no key');
  if (entries.length > MAX_KEYS) throw new ClientKeyError(`the JWKS holds more than ${MAX_KEYS} keys`);
  const keys: ClientKey[] = [];
  for (const [i, entry] of entries.entries()) {
    if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) {
      throw new ClientKeyError(`key ${i + 1} of the JWKS is not a JSON object`);
    }
    const jwk = entry as Record<string, unknown>;
    const problem = keyProblem(jwk);
    if (problem) throw new ClientKeyError(`key ${i + 1} of the JWKS is refused: ${problem}`);
    const alg: ClientAssertionAlgorithm = jwk.kty === 'EC' ? 'ES384' : 'RS384';
    const kid = jwk.kid as string;
    if (keys.some((k) => k.kid === kid)) throw new ClientKeyError(`the JWKS has two keys with kid "${kid}"`);
    const publicJwk = { ...(jwk as JWK), alg };
    try {
      await importJWK(publicJwk, alg);
    } catch (error) {
      throw new ClientKeyError(`key ${i + 1} of the JWKS ("${kid}") is not a valid key: ${(error as Error).message}`);
    }
    keys.push({ kid, alg, jwk: publicJwk });
  }
  return keys;
}

/** The stored form: a JWKS of the checked public keys, each with its `alg`. */
export function clientJwksText(keys: readonly ClientKey[]): string {
  return JSON.stringify({ keys: keys.map((k) => k.jwk) });
}

/** Reads the stored form back (it was checked when stored). */
export function storedClientKeys(text: string | null | undefined): ClientKey[] {
  if (!text) return [];
  const { keys } = JSON.parse(text) as { keys: JWK[] };
  return keys.map((jwk) => ({ kid: jwk.kid!, alg: jwk.alg as ClientAssertionAlgorithm, jwk }));
}

/** The key as a CryptoKey for verifying. */
export async function importClientKey(key: ClientKey): Promise<CryptoKey> {
  return (await importJWK(key.jwk, key.alg)) as CryptoKey;
}
