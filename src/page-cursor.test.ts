import { describe, expect, it } from 'vitest';
import { CursorKey, openCursor, signCursor } from './page-cursor.js';
import type { SqlExecutor } from './storage/sql/database.js';

describe('page cursors', () => {
  const key = 'k'.repeat(64);

  it('round-trip their values on the list they were signed for', () => {
    const token = signCursor(key, [1700000000000, 42, 'smith', null], 'history:Patient/?_since=');
    expect(openCursor(key, token, 'history:Patient/?_since=')).toEqual([1700000000000, 42, 'smith', null]);
    expect(token).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
  });

  it('open nothing altered, forged, truncated, of another list or signed with another key', () => {
    const token = signCursor(key, [42], 'scribe:a');
    const [payload, mac] = token.split('.');
    const forged = Buffer.from('[43]').toString('base64url');
    const unsigned = Buffer.from('before:43').toString('base64url');
    for (const bad of [`${forged}.${mac}`, `${payload}.x${mac.slice(1)}`, payload, `${token}.x`, unsigned, '', '..']) {
      expect(openCursor(key, bad, 'scribe:a')).toBeUndefined();
    }
    expect(openCursor(key, token, 'scribe:b')).toBeUndefined();
    expect(openCursor('other'.repeat(13), token, 'scribe:a')).toBeUndefined();
  });

  it('open nothing but an array, even when signed', () => {
    const payload = Buffer.from('{"before":42}').toString('base64url');
    const [, mac] = signCursor(key, [], 'list').split('.');
    expect(openCursor(key, `${payload}.${mac}`, 'list')).toBeUndefined();
  });
});

describe('CursorKey', () => {
  /** An executor answering the key query with `rows` (or failing), counting the queries. */
  const executor = (answers: (() => Promise<unknown[]>)[]) => {
    const db = { queries: 0, query: () => answers[db.queries++]() };
    return db as unknown as SqlExecutor & { queries: number };
  };

  it('reads the key once, through the executor given', async () => {
    const db = executor([]);
    const own = executor([async () => [{ secret: 's' }]]);
    const keys = new CursorKey(db);
    expect(await keys.read(own)).toBe('s');
    expect(await keys.read()).toBe('s');
    expect([db.queries, own.queries]).toEqual([0, 1]);
  });

  it('reads it again after a failed read', async () => {
    const db = executor([async () => Promise.reject(new Error('down')), async () => [], async () => [{ secret: 's' }]]);
    const keys = new CursorKey(db);
    await expect(keys.read()).rejects.toThrow('down');
    await expect(keys.read()).rejects.toThrow('search_key has no row');
    expect(await keys.read()).toBe('s');
  });
});
