// Password hashing: argon2id (RFC 9106) with the OWASP-recommended minimum cost (19 MiB, 2 passes,
// 1 lane), the defaults of @node-rs/argon2 written out so they never change under us.
import { randomBytes } from 'node:crypto';
import { hash, verify } from '@node-rs/argon2';

const ARGON2ID = 2; // Algorithm.Argon2id (a const enum, which per-file transpilers cannot inline)
const OPTIONS = { algorithm: ARGON2ID, memoryCost: 19456, timeCost: 2, parallelism: 1, outputLen: 32 } as const;

export const MIN_PASSWORD_LENGTH = 8;
export const MAX_PASSWORD_LENGTH = 1024;

/** Why a new password is refused, or undefined when it is acceptable. */
export function passwordProblem(password: string): string | undefined {
  if (password.length < MIN_PASSWORD_LENGTH) return `the password must have at least ${MIN_PASSWORD_LENGTH} characters`;
  if (password.length > MAX_PASSWORD_LENGTH) return `the password must have at most ${MAX_PASSWORD_LENGTH} characters`;
  return undefined;
}

export function hashPassword(password: string): Promise<string> {
  return hash(password, OPTIONS);
}

/** True when the password matches the hash; false (never an exception) for a malformed hash. */
export async function verifyPassword(passwordHash: string, password: string): Promise<boolean> {
  try {
    return await verify(passwordHash, password);
  } catch {
    return false;
  }
}

/**
 * A hash of a random password, with the same cost as real ones: the token endpoint verifies unknown
 * usernames against it, so a wrong username takes as long as a wrong password.
 */
export function dummyPasswordHash(): Promise<string> {
  return hashPassword(randomBytes(18).toString('base64url'));
}
