import { describe, expect, it } from 'vitest';
import type { SqlDatabase } from '../storage/sql/database.js';
import type { Account, AccountStore } from './accounts.js';
import { AccountCache, AuthStateVersion } from './auth-state.js';

/** A database whose version reads resolve when the test says so. */
function controlledDb() {
  const pending: { resolve: (rows: unknown[]) => void; startedAt: number }[] = [];
  let version = 1;
  const db = {
    query: () => new Promise((resolve) => pending.push({ resolve, startedAt: version })),
  } as unknown as SqlDatabase;
  return {
    db,
    pending,
    setVersion: (v: number) => (version = v),
    /** Finishes the oldest read with the version current when it started. */
    finish: () => {
      const read = pending.shift()!;
      read.resolve([{ version: read.startedAt }]);
    },
  };
}

const flush = () => new Promise((resolve) => setImmediate(resolve));

describe('AuthStateVersion', () => {
  it('shares one read among callers that arrive together, but never one begun before they asked', async () => {
    const c = controlledDb();
    const reader = new AuthStateVersion(c.db);
    const first = reader.read();
    expect(c.pending).toHaveLength(1);
    // A change commits while the first read is in flight; callers arriving now must see it.
    c.setVersion(2);
    const second = reader.read();
    const third = reader.read();
    expect(c.pending).toHaveLength(1); // queued behind the first, not joined to it
    c.finish();
    expect(await first).toBe(1);
    await flush();
    expect(c.pending).toHaveLength(1); // one read for both queued callers
    c.finish();
    expect(await second).toBe(2);
    expect(await third).toBe(2);
    // Idle again: the next caller starts its own read.
    const fourth = reader.read();
    expect(c.pending).toHaveLength(1);
    c.finish();
    expect(await fourth).toBe(2);
  });

  it('a failed read fails its callers only', async () => {
    let fail = true;
    const db = {
      query: async () => {
        if (fail) throw new Error('down');
        return [{ version: 7 }];
      },
    } as unknown as SqlDatabase;
    const reader = new AuthStateVersion(db);
    await expect(reader.read()).rejects.toThrow('down');
    fail = false;
    expect(await reader.read()).toBe(7);
  });
});

describe('AccountCache', () => {
  const account = (id: string, active: boolean): Account => ({
    id,
    username: id,
    active,
    apiAccess: true,
    scopes: [],
    rateLimit: null,
    tokensNotBefore: 0,
    tokenGeneration: 0,
    clientKeys: [],
    createdAt: '',
    updatedAt: '',
  });

  it('loads once per version and reloads when the version moves', async () => {
    let active = true;
    let loads = 0;
    const store = { findById: async (id: string) => (loads++, account(id, active)) } as unknown as AccountStore;
    const cache = new AccountCache(store);
    expect((await cache.get('a', 1))!.active).toBe(true);
    expect((await cache.get('a', 1))!.active).toBe(true);
    expect(loads).toBe(1);
    active = false;
    expect((await cache.get('a', 2))!.active).toBe(false);
    expect(loads).toBe(2);
  });

  it('does not keep a load that overlapped a change', async () => {
    let release!: () => void;
    let active = true;
    const store = {
      findById: (id: string) => {
        const snapshot = account(id, active);
        return new Promise((resolve) => (release = () => resolve(snapshot)));
      },
    } as unknown as AccountStore;
    const cache = new AccountCache(store);
    const slow = cache.get('a', 1); // reads the state before the change...
    const releaseSlow = release;
    active = false; // ...a change commits (version 2)...
    const fresh = cache.get('a', 2); // ...a later request sees version 2 and loads again
    release();
    expect((await fresh)!.active).toBe(false);
    releaseSlow();
    expect((await slow)!.active).toBe(true);
    // The stale load did not overwrite the cache.
    expect((await cache.get('a', 2))!.active).toBe(false);
  });

  it('remembers deleted accounts as null', async () => {
    let loads = 0;
    const store = { findById: async () => (loads++, undefined) } as unknown as AccountStore;
    const cache = new AccountCache(store);
    expect(await cache.get('gone', 1)).toBeNull();
    expect(await cache.get('gone', 1)).toBeNull();
    expect(loads).toBe(1);
  });
});
