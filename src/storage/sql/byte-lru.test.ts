import { describe, expect, it } from 'vitest';
import { preparedStatementBytes, STATEMENT_CACHE_LIMITS, statementCache } from '../sqlite/statement-cache.js';
import { ByteLru } from './byte-lru.js';

describe('ByteLru', () => {
  it('evicts the least recently used entries once the bytes are over the bound', () => {
    const cache = new ByteLru<string>({ maxBytes: 100, maxEntries: 1000 });
    expect(cache.set('a', 'A', 20)).toEqual([]);
    expect(cache.set('b', 'B', 20)).toEqual([]);
    expect(cache.set('c', 'C', 20)).toEqual([]);
    expect(cache.get('a')).toBe('A'); // now the most recently used: b is the oldest
    expect(cache.set('d', 'D', 25)).toEqual([]);
    expect(cache.bytes).toBe(85);
    expect(cache.set('e', 'E', 25)).toEqual(['b']);
    expect(cache.set('f', 'F', 25)).toEqual(['c']);
    expect([cache.has('a'), cache.has('b'), cache.has('c')]).toEqual([true, false, false]);
    expect(cache.bytes).toBe(95);
    expect(cache.set('g', 'G', 25)).toEqual(['a']);
    expect(cache.bytes).toBe(100);
    expect(cache.size).toBe(4);
  });

  it('holds many small entries up to the entry bound', () => {
    const cache = new ByteLru<number>({ maxBytes: 1_000_000, maxEntries: 3 });
    for (let i = 0; i < 3; i++) cache.set(`k${i}`, i, 1);
    expect(cache.set('k3', 3, 1)).toEqual(['k0']);
    expect(cache.get('k1')).toBe(1);
  });

  it('does not cache an entry larger than a quarter of the bound, nor flush the others for it', () => {
    const cache = new ByteLru<string>({ maxBytes: 100, maxEntries: 10 });
    cache.set('small', 's', 10);
    expect(cache.set('huge', 'h', 26)).toEqual(['huge']);
    expect(cache.has('huge')).toBe(false);
    expect(cache.get('small')).toBe('s');
    expect(cache.bytes).toBe(10);
  });

  it('counts a replaced entry once', () => {
    const cache = new ByteLru<string>({ maxBytes: 100, maxEntries: 10 });
    cache.set('a', '1', 20);
    cache.set('a', '2', 10);
    expect(cache.bytes).toBe(10);
    expect(cache.get('a')).toBe('2');
  });
});

describe('the SQLite statement cache', () => {
  it('keeps the statements of repeated searches but not those of a thousand long OR lists', () => {
    const cache = statementCache<true>();
    const common = 'SELECT pk FROM resource WHERE type = ? AND id = ?';
    cache.set(common, true, preparedStatementBytes(common));
    // A thousand distinct searches with 150 to 1,000 OR'd token values: ~5-35 KB of text each.
    for (let i = 0; i < 1000; i++) {
      const n = 150 + ((i * 7) % 850);
      const text = `SELECT pk FROM idx_token t WHERE ${Array.from({ length: n }, () => '(t.code = ? AND t.system = ?)').join(' OR ')} -- ${i}`;
      cache.set(text, true, preparedStatementBytes(text));
      if (i % 10 === 0) cache.get(common);
      expect(cache.bytes).toBeLessThanOrEqual(STATEMENT_CACHE_LIMITS.maxBytes);
    }
    expect(cache.has(common)).toBe(true);
  });
});
