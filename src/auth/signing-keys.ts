// The ES256 signing keys: kept in the database so that every server process sharing it signs and verifies
// with the same keys. `keys rotate` adds a key; the newest signs, all of them verify (old tokens stay
// valid until they expire). `keys retire` takes a key out of use: its tokens are refused and it leaves
// the JWKS, from the next request on in every process. The kid is the key's RFC 7638 thumbprint.
import { calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK } from 'jose';
import type { CryptoKey, JWK } from 'jose';
import type { SqlDatabase } from '../storage/sql/database.js';
import { bumpAuthState } from './accounts.js';

export const SIGNING_ALGORITHM = 'ES256';

export interface SigningKeyInfo {
  readonly kid: string;
  readonly algorithm: string;
  readonly createdAt: string;
  /** When `keys retire` took it out of use; undefined while it is in use. */
  readonly retiredAt?: string;
}

type KeyRow = {
  kid: string;
  algorithm: string;
  private_jwk: string;
  public_jwk: string;
  created_at: string;
  retired_at: string | null;
};

/** A refused key operation, with a message written for the administrator. */
export class SigningKeyError extends Error {}

/** Keys in use, oldest first: the last one signs. */
const IN_USE = 'retired_at IS NULL ORDER BY created_at, kid';

interface LoadedKey extends SigningKeyInfo {
  readonly publicJwk: JWK;
  readonly publicKey: CryptoKey;
  readonly privateKey: CryptoKey;
}

/** Creates a new signing key and stores it; returns its kid. */
export async function addSigningKey(db: SqlDatabase, now: Date = new Date()): Promise<SigningKeyInfo> {
  const { privateKey, publicKey } = await generateKeyPair(SIGNING_ALGORITHM, { extractable: true });
  const publicJwk = await exportJWK(publicKey);
  const privateJwk = await exportJWK(privateKey);
  const kid = await calculateJwkThumbprint(publicJwk, 'sha256');
  const createdAt = now.toISOString();
  await db.transaction(async (tx) => {
    await tx.execute(
      'INSERT INTO signing_key (kid, algorithm, private_jwk, public_jwk, created_at) VALUES (?, ?, ?, ?, ?)',
      [kid, SIGNING_ALGORITHM, JSON.stringify(privateJwk), JSON.stringify(publicJwk), createdAt],
    );
    await bumpAuthState(tx);
  });
  return { kid, algorithm: SIGNING_ALGORITHM, createdAt };
}

export async function listSigningKeys(db: SqlDatabase): Promise<SigningKeyInfo[]> {
  const rows = await db.query<KeyRow>(
    'SELECT kid, algorithm, created_at, retired_at FROM signing_key ORDER BY created_at, kid',
  );
  return rows.map(keyInfo);
}

function keyInfo(r: Pick<KeyRow, 'kid' | 'algorithm' | 'created_at' | 'retired_at'>): SigningKeyInfo {
  return {
    kid: r.kid,
    algorithm: r.algorithm,
    createdAt: r.created_at,
    ...(r.retired_at ? { retiredAt: r.retired_at } : {}),
  };
}

/**
 * Retires a key: its tokens are refused and it leaves the JWKS, from the next request on, in every server
 * process on the database (the auth state version moves). The key that signs new tokens (the newest in
 * use) cannot be retired, since the servers would have none left to sign with: `keys rotate` first, then
 * retire it. Retiring a retired key changes nothing.
 */
export async function retireSigningKey(db: SqlDatabase, kid: string, now: Date = new Date()): Promise<SigningKeyInfo> {
  return db.transaction(async (tx) => {
    const [key] = await tx.query<KeyRow>(
      'SELECT kid, algorithm, created_at, retired_at FROM signing_key WHERE kid = ?',
      [kid],
    );
    if (!key) throw new SigningKeyError(`No signing key with kid "${kid}" (see keys list)`);
    if (key.retired_at) return keyInfo(key);
    const inUse = await tx.query<{ kid: string }>(`SELECT kid FROM signing_key WHERE ${IN_USE}${tx.dialect.forUpdate}`);
    if (inUse.at(-1)?.kid === kid) {
      throw new SigningKeyError(
        `The key "${kid}" is the current signing key: run keys rotate first (tokens it signed stay valid until then), then retire it`,
      );
    }
    const retiredAt = now.toISOString();
    await tx.execute('UPDATE signing_key SET retired_at = ? WHERE kid = ?', [retiredAt, kid]);
    await bumpAuthState(tx);
    return keyInfo({ ...key, retired_at: retiredAt });
  });
}

/** The first start on a database creates its first key. */
export async function ensureSigningKey(db: SqlDatabase): Promise<void> {
  const rows = await db.query(`SELECT kid FROM signing_key WHERE ${IN_USE}`);
  if (rows.length === 0) await addSigningKey(db);
}

/**
 * This process's copy of the keys. It reloads when the auth state version moves (a rotation anywhere
 * bumps it) and, at most once a second, when a token names a kid it does not know.
 */
export class KeyRing {
  private keys = new Map<string, LoadedKey>();
  private newest: LoadedKey | undefined;
  private loadedVersion = -1;
  private lastUnknownKidReload = 0;
  private loading: Promise<void> | undefined;
  private loadingVersion = -1;

  constructor(
    private readonly db: SqlDatabase,
    private readonly unknownKidReloadIntervalMs = 1000,
  ) {}

  /** Reloads the keys when `version` (the current auth state version) differs from the loaded one. */
  async sync(version: number): Promise<void> {
    if (version !== this.loadedVersion) await this.reload(version);
  }

  /** Is this kid in use as of the loaded version? (Call `sync` first: a verified-token cache asks.) */
  has(kid: string): boolean {
    return this.keys.has(kid);
  }

  /** The public key for a kid, reloading once (rate-limited) when the kid is unknown. */
  async publicKey(kid: string, version: number): Promise<CryptoKey | undefined> {
    const known = this.keys.get(kid);
    if (known) return known.publicKey;
    if (version !== this.loadedVersion) {
      await this.reload(version);
    } else if (Date.now() - this.lastUnknownKidReload >= this.unknownKidReloadIntervalMs) {
      this.lastUnknownKidReload = Date.now();
      await this.reload(version);
    }
    return this.keys.get(kid)?.publicKey;
  }

  /** The key that signs new tokens: the newest one. */
  async signingKey(version: number): Promise<{ kid: string; privateKey: CryptoKey }> {
    await this.sync(version);
    if (!this.newest) throw new Error('No signing key in the database');
    return { kid: this.newest.kid, privateKey: this.newest.privateKey };
  }

  /** The JWKS document (RFC 7517) of every key. */
  async jwks(version: number): Promise<{ keys: JWK[] }> {
    await this.sync(version);
    return {
      keys: [...this.keys.values()].map((k) => ({ ...k.publicJwk, kid: k.kid, alg: k.algorithm, use: 'sig' })),
    };
  }

  /** Concurrent reloads for one version share one query; a reload for a newer version waits and runs its own. */
  private async reload(version: number): Promise<void> {
    while (this.loading) {
      const sharedVersion = this.loadingVersion;
      await this.loading.catch(() => undefined);
      if (sharedVersion === version) return;
    }
    this.loadingVersion = version;
    this.loading = this.load(version).finally(() => {
      this.loading = undefined;
    });
    return this.loading;
  }

  private async load(version: number): Promise<void> {
    const rows = await this.db.query<KeyRow>(
      `SELECT kid, algorithm, private_jwk, public_jwk, created_at, retired_at FROM signing_key WHERE ${IN_USE}`,
    );
    const keys = new Map<string, LoadedKey>();
    let newest: LoadedKey | undefined;
    for (const row of rows) {
      if (row.algorithm !== SIGNING_ALGORITHM) continue;
      const existing = this.keys.get(row.kid);
      const publicJwk = JSON.parse(row.public_jwk) as JWK;
      const key: LoadedKey = existing ?? {
        kid: row.kid,
        algorithm: row.algorithm,
        createdAt: row.created_at,
        publicJwk,
        publicKey: (await importJWK(publicJwk, SIGNING_ALGORITHM)) as CryptoKey,
        privateKey: (await importJWK(JSON.parse(row.private_jwk) as JWK, SIGNING_ALGORITHM)) as CryptoKey,
      };
      keys.set(row.kid, key);
      newest = key;
    }
    this.keys = keys;
    this.newest = newest;
    this.loadedVersion = version;
  }
}
