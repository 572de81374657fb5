import { describe, expect, it } from 'vitest';
import { canonicalRow, TableSum } from './checksum.js';

const sumOf = (rows: Record<string, unknown>[]) => {
  const sum = new TableSum();
  for (const row of rows) sum.add(row);
  return sum;
};

describe('canonicalRow', () => {
  it('is the same whatever the order of the columns, and tells kinds and boundaries apart', () => {
    expect(canonicalRow({ a: 1, b: 'x' })).toBe(canonicalRow({ b: 'x', a: 1 }));
    expect(canonicalRow({ a: 1 })).not.toBe(canonicalRow({ a: '1' }));
    expect(canonicalRow({ a: null })).not.toBe(canonicalRow({ a: '' }));
    expect(canonicalRow({ a: null })).not.toBe(canonicalRow({ a: 'z' }));
    // A text holding what would follow it cannot pass for two columns.
    expect(canonicalRow({ a: 'x;b=s1:y', b: null })).not.toBe(canonicalRow({ a: 'x', b: 'y' }));
    expect(canonicalRow({ a: 5n })).toBe(canonicalRow({ a: 5 }));
    expect(canonicalRow({ a: Buffer.from('hi') })).not.toBe(canonicalRow({ a: 'hi' }));
  });
});

describe('TableSum', () => {
  const rows = [
    { pk: 1, v: 'a' },
    { pk: 2, v: 'b' },
    { pk: 3, v: null },
  ];

  it('counts the rows and does not depend on their order', () => {
    const sum = sumOf(rows);
    expect(sum.rows).toBe(3);
    expect(sum.checksum).toMatch(/^[0-9a-f]{64}$/);
    expect(sumOf([...rows].reverse()).checksum).toBe(sum.checksum);
    expect(sumOf([]).checksum).toBe('0'.repeat(64));
  });

  it('changes with a row changed, lost or repeated', () => {
    const { checksum } = sumOf(rows);
    expect(sumOf([rows[0], rows[1], { pk: 3, v: '' }]).checksum).not.toBe(checksum);
    expect(sumOf(rows.slice(1)).checksum).not.toBe(checksum);
    expect(sumOf([...rows, rows[0]]).checksum).not.toBe(checksum);
    // Two copies of a row do not cancel out (as they would under XOR).
    expect(sumOf([rows[0], rows[0]]).checksum).not.toBe(sumOf([]).checksum);
  });
});
