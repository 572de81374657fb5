import { describe, expect, it } from 'vitest';
import { RowLimitExceeded, RowSink } from './tables.js';

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
