// Service accounts: the one place that reads and writes the `account` table, for the CLI and the server
// alike. Every change bumps `auth_state.version` in the same transaction, which is how running servers
// notice it on their next request (see auth-state.ts and docs/auth.md).
import { randomUUID } from 'node:crypto';
import { UniqueViolationError } from '../storage/sql/database.js';
import type { SqlDatabase, SqlExecutor } from '../storage/sql/database.js';
import { ClientKeyError, clientJwksText, parseClientJwks, storedClientKeys } from './client-keys.js';
import type { ClientKey } from './client-keys.js';
import { hashPassword, passwordProblem } from './passwords.js';
import { DEFAULT_SCOPES, ScopeError, splitScopes, validateScopes } from './scopes.js';

export interface Account {
  readonly id: string;
  readonly username: string;
  readonly active: boolean;
  readonly apiAccess: boolean;
  readonly scopes: readonly string[];
  /** Requests per minute; null means no per-account limit. */
  readonly rateLimit: number | null;
  /**
   * When the account's tokens were last revoked, in epoch seconds rounded up (0 when never): shown to the
   * administrator, and the test for tokens issued before token generations existed (they carry none).
   */
  readonly tokensNotBefore: number;
  /**
   * How many times the account's tokens were revoked: each token carries the generation it was issued in,
   * and one of an earlier generation is refused (authenticator.ts). Exact where a time in seconds is not.
   */
  readonly tokenGeneration: number;
  /** The public keys registered for SMART Backend Services (client assertions); empty when none. */
  readonly clientKeys: readonly ClientKey[];
  readonly createdAt: string;
  readonly updatedAt: string;
}

export interface NewAccount {
  readonly username: string;
  readonly password: string;
  readonly scopes?: readonly string[];
  readonly rateLimit?: number | null;
  readonly active?: boolean;
  readonly apiAccess?: boolean;
  /** A JWKS text of RS384/ES384 public keys (see client-keys.ts). */
  readonly jwks?: string;
}

export interface AccountChanges {
  readonly password?: string;
  readonly scopes?: readonly string[];
  readonly rateLimit?: number | null;
  readonly active?: boolean;
  readonly apiAccess?: boolean;
  /** A JWKS text: replaces the registered public keys. */
  readonly jwks?: string;
}

export type AccountErrorCode = 'exists' | 'not-found' | 'invalid';

/** A refused account operation, with a message written for the administrator. */
export class AccountError extends Error {
  constructor(
    readonly code: AccountErrorCode,
    message: string,
  ) {
    super(message);
  }
}

type AccountRow = {
  id: string;
  username: string;
  password_hash: string;
  active: number;
  api_access: number;
  scopes: string;
  rate_limit: number | null;
  tokens_not_before: number;
  token_generation: number;
  login_lock_epoch?: number;
  jwks: string | null;
  created_at: string;
  updated_at: string;
};

const COLUMNS =
  'id, username, active, api_access, scopes, rate_limit, tokens_not_before, token_generation, jwks, created_at, updated_at';

export const MAX_USERNAME_LENGTH = 254;
export const MAX_RATE_LIMIT = 1_000_000;

/** Usernames (or e-mail addresses) are compared after Unicode NFC normalisation. */
export function normalizeUsername(username: string): string {
  return username.normalize('NFC');
}

function usernameProblem(username: string): string | undefined {
  if (username.length === 0) return 'the username must not be empty';
  if (username.length > MAX_USERNAME_LENGTH) return `the username must have at most ${MAX_USERNAME_LENGTH} characters`;
  if (/[\s\p{C}]/u.test(username)) return 'the username must not contain spaces or control characters';
  return undefined;
}

function toAccount(row: AccountRow): Account {
  return {
    id: row.id,
    username: row.username,
    active: Number(row.active) === 1,
    apiAccess: Number(row.api_access) === 1,
    scopes: splitScopes(row.scopes),
    rateLimit: row.rate_limit === null || Number(row.rate_limit) === 0 ? null : Number(row.rate_limit),
    tokensNotBefore: Number(row.tokens_not_before),
    tokenGeneration: Number(row.token_generation),
    clientKeys: storedClientKeys(row.jwks),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** The account as the CLI prints it (docs/api.md): never the password or its hash. */
export function accountJson(account: Account): Record<string, unknown> {
  return {
    id: account.id,
    username: account.username,
    active: account.active,
    api_access: account.apiAccess,
    scopes: [...account.scopes],
    rate_limit: account.rateLimit,
    tokens_not_before: account.tokensNotBefore > 0 ? new Date(account.tokensNotBefore * 1000).toISOString() : null,
    // Only the key ids and algorithms: the public keys themselves are in the JWKS file registered.
    ...(account.clientKeys.length > 0
      ? { client_keys: account.clientKeys.map((k) => ({ kid: k.kid, alg: k.alg })) }
      : {}),
    created_at: account.createdAt,
    updated_at: account.updatedAt,
  };
}

/** Bumps the counter every server process polls; call inside the transaction of the change. */
export async function bumpAuthState(tx: SqlExecutor): Promise<void> {
  await tx.execute('UPDATE auth_state SET version = version + 1 WHERE id = 1');
}

/**
 * Ends every token issued until now: the next token generation (the test of every token that carries
 * one), and the revocation time, which never moves back (shown, and the test of older tokens).
 */
const REVOKE_TOKENS =
  'token_generation = token_generation + 1, tokens_not_before = CASE WHEN tokens_not_before > ? THEN tokens_not_before ELSE ? END';

export interface AccountStoreOptions {
  /** Rejects scopes naming a type that R4 does not define (the CLI passes the R4 registry's test). */
  readonly isResourceType?: (name: string) => boolean;
  /** The clock, in milliseconds (tests). */
  readonly now?: () => number;
}

export class AccountStore {
  private readonly now: () => number;

  constructor(
    private readonly db: SqlDatabase,
    private readonly options: AccountStoreOptions = {},
  ) {
    this.now = options.now ?? Date.now;
  }

  async create(input: NewAccount): Promise<Account> {
    const username = normalizeUsername(input.username);
    const problem = usernameProblem(username) ?? passwordProblem(input.password);
    if (problem) throw new AccountError('invalid', `Cannot create the account: ${problem}`);
    const scopes = this.scopes(input.scopes ?? DEFAULT_SCOPES);
    const rateLimit = this.rateLimit(input.rateLimit);
    const jwks = input.jwks === undefined ? null : await this.jwks(input.jwks);
    const passwordHash = await hashPassword(input.password);
    const at = new Date(this.now()).toISOString();
    const id = randomUUID();
    try {
      await this.db.transaction(async (tx) => {
        await tx.execute(
          `INSERT INTO account (id, username, password_hash, active, api_access, scopes, rate_limit, tokens_not_before, jwks, created_at, updated_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?)`,
          [
            id,
            username,
            passwordHash,
            input.active === false ? 0 : 1,
            input.apiAccess === false ? 0 : 1,
            scopes.join(' '),
            rateLimit,
            jwks,
            at,
            at,
          ],
        );
        await bumpAuthState(tx);
      });
    } catch (error) {
      if (error instanceof UniqueViolationError) {
        throw new AccountError('exists', `An account named "${username}" already exists`);
      }
      throw error;
    }
    return this.require(username);
  }

  /**
   * Changes only what `changes` names; returns the account as it is afterwards. A new password, a
   * deactivation or the loss of API access also ends every token issued until now (as `revokeTokens`),
   * so that undoing the change later does not bring those tokens back.
   */
  async update(username: string, changes: AccountChanges): Promise<Account> {
    const sets: string[] = [];
    const params: (string | number | null)[] = [];
    if (changes.password !== undefined || changes.active === false || changes.apiAccess === false) {
      sets.push(REVOKE_TOKENS);
      params.push(...this.revocationParams());
    }
    if (changes.password !== undefined) {
      const problem = passwordProblem(changes.password);
      if (problem) throw new AccountError('invalid', `Cannot update the account: ${problem}`);
      sets.push('password_hash = ?');
      params.push(await hashPassword(changes.password));
    }
    if (changes.scopes !== undefined) {
      sets.push('scopes = ?');
      params.push(this.scopes(changes.scopes).join(' '));
    }
    if (changes.rateLimit !== undefined) {
      sets.push('rate_limit = ?');
      params.push(this.rateLimit(changes.rateLimit));
    }
    if (changes.active !== undefined) {
      sets.push('active = ?');
      params.push(changes.active ? 1 : 0);
    }
    if (changes.apiAccess !== undefined) {
      sets.push('api_access = ?');
      params.push(changes.apiAccess ? 1 : 0);
    }
    if (changes.jwks !== undefined) {
      sets.push('jwks = ?');
      params.push(await this.jwks(changes.jwks));
    }
    if (sets.length === 0) throw new AccountError('invalid', 'Nothing to update: name at least one change');
    sets.push('updated_at = ?');
    params.push(new Date(this.now()).toISOString());
    await this.change(username, `UPDATE account SET ${sets.join(', ')} WHERE username = ?`, params);
    return this.require(username);
  }

  /** Refuses every token issued to the account before now (from the next request on, in every process). */
  async revokeTokens(username: string): Promise<Account> {
    await this.change(username, `UPDATE account SET ${REVOKE_TOKENS}, updated_at = ? WHERE username = ?`, [
      ...this.revocationParams(),
      new Date(this.now()).toISOString(),
    ]);
    return this.require(username);
  }

  /**
   * Clears the account's failed-login lockout in every server process: its login counters are keyed by
   * `login_lock_epoch` (see rate-counters.ts, token-endpoint.ts), which this moves, so the next token request of
   * any process, in-process counters or Redis alike, counts from zero. Locks on client addresses stay.
   */
  async unlock(username: string): Promise<Account> {
    await this.change(username, 'UPDATE account SET login_lock_epoch = login_lock_epoch + 1 WHERE username = ?', []);
    return this.require(username);
  }

  async delete(username: string): Promise<Account> {
    const account = await this.require(username);
    await this.change(username, 'DELETE FROM account WHERE username = ?', []);
    return account;
  }

  async list(): Promise<Account[]> {
    const rows = await this.db.query<AccountRow>(`SELECT ${COLUMNS} FROM account ORDER BY username`);
    return rows.map(toAccount);
  }

  async count(): Promise<number> {
    const [row] = await this.db.query<{ n: number | string }>('SELECT COUNT(*) AS n FROM account');
    return Number(row?.n ?? 0);
  }

  async findByUsername(username: string): Promise<Account | undefined> {
    const rows = await this.db.query<AccountRow>(`SELECT ${COLUMNS} FROM account WHERE username = ?`, [
      normalizeUsername(username),
    ]);
    return rows.length > 0 ? toAccount(rows[0]) : undefined;
  }

  async findById(id: string): Promise<Account | undefined> {
    const rows = await this.db.query<AccountRow>(`SELECT ${COLUMNS} FROM account WHERE id = ?`, [id]);
    return rows.length > 0 ? toAccount(rows[0]) : undefined;
  }

  /** The account with its password hash and unlock epoch, for the token endpoint only. */
  async findCredentials(
    username: string,
  ): Promise<{ account: Account; passwordHash: string; loginLockEpoch: number } | undefined> {
    const rows = await this.db.query<AccountRow>(
      `SELECT ${COLUMNS}, password_hash, login_lock_epoch FROM account WHERE username = ?`,
      [normalizeUsername(username)],
    );
    if (rows.length === 0) return undefined;
    const row = rows[0];
    return {
      account: toAccount(row),
      passwordHash: row.password_hash,
      loginLockEpoch: Number(row.login_lock_epoch ?? 0),
    };
  }

  async require(username: string): Promise<Account> {
    const account = await this.findByUsername(username);
    if (!account) throw notFound(username);
    return account;
  }

  private async change(username: string, sql: string, params: (string | number | null)[]): Promise<void> {
    const changed = await this.db.transaction(async (tx) => {
      const count = await tx.execute(sql, [...params, normalizeUsername(username)]);
      if (count > 0) await bumpAuthState(tx);
      return count;
    });
    if (changed === 0) throw notFound(username);
  }

  /** The parameters of REVOKE_TOKENS: the revocation time (whole seconds, rounded up), twice. */
  private revocationParams(): [number, number] {
    const notBefore = Math.ceil(this.now() / 1000);
    return [notBefore, notBefore];
  }

  private scopes(scopes: readonly string[]): string[] {
    try {
      return validateScopes(
        scopes.flatMap((s) => splitScopes(s)),
        this.options.isResourceType,
      );
    } catch (error) {
      if (error instanceof ScopeError) throw new AccountError('invalid', `Invalid scopes: ${error.message}`);
      throw error;
    }
  }

  private async jwks(text: string): Promise<string> {
    try {
      return clientJwksText(await parseClientJwks(text));
    } catch (error) {
      if (error instanceof ClientKeyError) throw new AccountError('invalid', `Invalid JWKS: ${error.message}`);
      throw error;
    }
  }

  private rateLimit(value: number | null | undefined): number | null {
    if (value === undefined || value === null || value === 0) return null;
    if (!Number.isInteger(value) || value < 0 || value > MAX_RATE_LIMIT) {
      throw new AccountError(
        'invalid',
        `Invalid rate limit ${value}: give requests per minute, an integer from 0 (no limit) to ${MAX_RATE_LIMIT}`,
      );
    }
    return value;
  }
}

function notFound(username: string): AccountError {
  return new AccountError('not-found', `No account named "${normalizeUsername(username)}"`);
}
