// Secrets every server process on one database shares (table `auth_secret`), and the one use made of
// them so far: a keyed hash (HMAC-SHA-256) of usernames. A username that matches no account may be a
// password typed into the wrong field, so it never appears in clear in a log line or a Redis key; an
// unsalted hash would not do, since a guessed password can be hashed and compared offline. With the key
// kept in the database, every process computes the same hash, so log lines and shared counters agree.
import { createHmac, randomBytes } from 'node:crypto';
import type { SqlDatabase } from '../storage/sql/database.js';

const USERNAME_HMAC = 'username-hmac';

/** The named secret, created (32 random bytes) by whichever process asks first. */
export async function loadAuthSecret(db: SqlDatabase, name: string): Promise<Buffer> {
  const read = async () =>
    (await db.query<{ secret: string }>('SELECT secret FROM auth_secret WHERE name = ?', [name]))[0]?.secret;
  let secret = await read();
  if (secret === undefined) {
    // Two processes starting at once may both get here: the first insert wins, both read its value.
    await db.execute(
      'INSERT INTO auth_secret (name, secret, created_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING',
      [name, randomBytes(32).toString('base64url'), new Date().toISOString()],
    );
    secret = await read();
  }
  if (secret === undefined) throw new Error(`The auth secret "${name}" could not be created`);
  return Buffer.from(secret, 'base64url');
}

export class UsernameHasher {
  private constructor(private readonly key: Buffer) {}

  static async load(db: SqlDatabase): Promise<UsernameHasher> {
    return new UsernameHasher(await loadAuthSecret(db, USERNAME_HMAC));
  }

  private hmac(username: string): string {
    return createHmac('sha256', this.key).update(username, 'utf8').digest('hex');
  }

  /** 128 bits: the part of a login counter's key that names a username. */
  counterKey(username: string): string {
    return this.hmac(username).slice(0, 32);
  }

  /** 64 bits: enough to tell attempts on one username apart in the audit log (`username_hmac`). */
  fingerprint(username: string): string {
    return this.hmac(username).slice(0, 16);
  }
}
