import { describe, expect, it } from 'vitest';
import { INDEX_KEY_LENGTH, indexKey, keyFit, RowLimitExceeded, RowSink, storedRow } from './tables.js';

describe('RowSink', () => {
  it('keeps each row once, per table, with few rows of a parameter and with many', () => {
    const sink = new RowSink();
    sink.add('idx_token', [1, 0, 'http://s', 'a', null]);
    sink.add('idx_token', [1, 0, 'http://s', 'a', null]); // the same row
    sink.add('idx_token', [1, 0, 'http://s', 'a', '']); // not the same: text '' is not NULL
    sink.add('idx_string', [1, 0, 'a', 'A']); // another table, same parameter number
    for (let i = 0; i < 40; i++) sink.add('idx_token', [2, 0, 's', `c${i % 20}`, null]);
    expect(sink.rows.get('idx_token')).toHaveLength(2 + 20);
    expect(sink.rows.get('idx_token')!.slice(2, 4)).toEqual([
      [2, 0, 's', 'c0', null],
      [2, 0, 's', 'c1', null],
    ]);
    expect(sink.rows.get('idx_string')).toEqual([[1, 0, 'a', 'A']]);
    expect(sink.size).toBe(23);
  });

  it('throws past its limit, counting distinct rows only', () => {
    const sink = new RowSink(3);
    for (let i = 0; i < 10; i++) sink.add('idx_string', [1, 0, 'same', 'Same']);
    sink.add('idx_string', [1, 0, 'b', 'B']);
    sink.add('idx_string', [2, 0, 'c', 'C']);
    expect(() => sink.add('idx_string', [2, 0, 'd', 'D'])).toThrow(RowLimitExceeded);
    expect(sink.size).toBe(3);
  });

  it('tells the same rows apart past a few rows of a parameter as before them (NULL is not an empty text)', () => {
    const sink = new RowSink();
    for (let i = 0; i < 20; i++) sink.add('idx_token', [3, 0, 's', `c${i}`, null]);
    sink.add('idx_token', [3, 0, 's', 'c0', '']);
    sink.add('idx_token', [3, 0, 's', 'c0', null]);
    expect(sink.size).toBe(21);
  });
});

describe('index keys', () => {
  const N = INDEX_KEY_LENGTH;

  it('cut long values after INDEX_KEY_LENGTH code points, never inside a surrogate pair', () => {
    expect(indexKey('short')).toBe('short');
    const emoji = '😀'.repeat(N + 10); // two UTF-16 units each
    expect(indexKey(emoji)).toBe('😀'.repeat(N));
    const mixed = 'a' + '😀'.repeat(N);
    expect(indexKey(mixed)).toBe('a' + '😀'.repeat(N - 1));
    expect([...indexKey(mixed)]).toHaveLength(N);
  });

  it('tell values shorter than a key, exactly a key long and longer apart, in code points', () => {
    expect(keyFit('x'.repeat(N - 1))).toBe('short');
    expect(keyFit('x'.repeat(N))).toBe('full');
    expect(keyFit('x'.repeat(N + 1))).toBe('long');
    // 300 UTF-16 units, but 150 code points.
    expect(keyFit('😀'.repeat(150))).toBe('short');
    expect(keyFit('😀'.repeat(N))).toBe('full');
  });

  it('fit two keyed columns of four-byte characters in one PostgreSQL B-tree entry (2,704 bytes)', () => {
    const key = indexKey('😀'.repeat(100_000));
    const bytes = Buffer.byteLength(key, 'utf8');
    // idx_token (sp, code, system, pk) and idx_quantity (sp, code, system, lo, pk): two keys, their
    // varlena headers, four 8-byte numbers and the entry's header.
    expect(2 * (bytes + 4) + 4 * 8 + 8).toBeLessThan(2704);
  });

  it('write the key in the indexed column and the whole value after the columns', () => {
    const long = 'u'.repeat(N + 5);
    expect(storedRow('idx_token', [1, 0, 'urn:s', long, 'text'])).toEqual([
      1,
      0,
      'urn:s',
      indexKey(long),
      'text',
      null,
      long,
    ]);
    expect(storedRow('idx_string', [1, 0, 'abc', 'ABC'])).toEqual([1, 0, 'abc', 'ABC', null]);
    expect(storedRow('idx_date', [1, 0, 10, 20])).toEqual([1, 0, 10, 20]);
  });
});
