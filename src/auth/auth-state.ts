// How a server process keeps per-process caches of accounts (and keys) without ever serving a stale one:
// every change to an account or a key, by this process or by the CLI in another, bumps the single row
// `auth_state.version` in the same transaction. Each authenticated request reads that one integer (an
// indexed single-row read); when it moved, the account cache is emptied. See docs/auth.md.
import type { SqlDatabase } from '../storage/sql/database.js';
import type { Account, AccountStore } from './accounts.js';

/**
 * Reads the auth state version. Concurrent callers share reads, but never one that started before they
 * asked: a caller that arrives while a read is in flight waits for the next read, which starts after the
 * current one ends. So a request that starts after a change has committed always sees it, and under load
 * at most one read is in flight per process (plus one queued) however many requests are waiting.
 */
export class AuthStateVersion {
  private inFlight: Promise<number> | undefined;
  private queued: Promise<number> | undefined;

  constructor(private readonly db: SqlDatabase) {}

  read(): Promise<number> {
    if (this.queued) return this.queued;
    if (!this.inFlight) return this.start();
    this.queued = this.inFlight
      .catch(() => undefined)
      .then(() => {
        this.queued = undefined;
        return this.start();
      });
    return this.queued;
  }

  private start(): Promise<number> {
    const tracked: Promise<number> = this.db
      .query<{ version: number }>('SELECT version FROM auth_state WHERE id = 1')
      .then((rows) => Number(rows[0]?.version ?? 0))
      .finally(() => {
        if (this.inFlight === tracked) this.inFlight = undefined;
      });
    this.inFlight = tracked;
    return tracked;
  }
}

/** Accounts by id, valid for one auth state version; emptied when the version moves. */
export class AccountCache {
  private version = -1;
  private readonly accounts = new Map<string, Account | null>();
  private readonly loading = new Map<string, Promise<Account | null>>();

  constructor(
    private readonly store: AccountStore,
    private readonly maxEntries = 10_000,
  ) {}

  /** The account as of `version` (a version read at the start of this request), or null when it is gone. */
  async get(id: string, version: number): Promise<Account | null> {
    if (version !== this.version) {
      if (version < this.version) return (await this.store.findById(id)) ?? null; // a slower, older read
      this.version = version;
      this.accounts.clear();
      this.loading.clear();
    }
    const cached = this.accounts.get(id);
    if (cached !== undefined) return cached;
    let pending = this.loading.get(id);
    if (!pending) {
      pending = this.store.findById(id).then((account) => account ?? null);
      this.loading.set(id, pending);
      const loadedFor = version;
      void pending.then(
        (account) => {
          // Only a load begun under the current version may fill the cache: one that overlapped a
          // change could hold the state from before it.
          if (this.loading.get(id) === pending) this.loading.delete(id);
          if (this.version !== loadedFor) return;
          if (this.accounts.size >= this.maxEntries) this.accounts.clear();
          this.accounts.set(id, account);
        },
        () => {
          if (this.loading.get(id) === pending) this.loading.delete(id);
        },
      );
    }
    return pending;
  }
}
